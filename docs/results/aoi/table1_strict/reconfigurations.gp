# reconfigurations of scenarios/aoi/table1.toml. Re-plot: run `gnuplot reconfigurations.gp` in this directory.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo noenhanced size 960,440
} else {
  set terminal png noenhanced size 960,440
}
set output "reconfigurations.png"
set multiplot layout 1,2 title "P4INC-AOI Table I: 8 units: reconfigured AOI connections"
set xlabel "DML jobs"
set ylabel "reconfigured AOI connections"
set yrange [0:*]
set offsets 0, 0, graph 0.05, 0
set grid
set key below horizontal maxcols 2
set bmargin 5
set xtics (40, 50, 60, 80, 100)
set mxtics 1
set ytics 50
set mytics 1
set format y "%.0f"
set title "20 jobs per TS"
plot "reconfigurations.dat" index 0 using 1:2 with linespoints lc rgb "#0072B2" pt 5 lw 2 title "INC-FCFS", \
     "reconfigurations.dat" index 1 using 1:2 with linespoints lc rgb "#332288" pt 4 lw 2 title "INC-FCFS-strict"
set title "200 jobs per TS"
plot "reconfigurations.dat" index 2 using 1:2 with linespoints lc rgb "#0072B2" pt 5 lw 2 title "INC-FCFS", \
     "reconfigurations.dat" index 3 using 1:2 with linespoints lc rgb "#332288" pt 4 lw 2 title "INC-FCFS-strict"
unset multiplot
