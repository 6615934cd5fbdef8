# reconfigurations of scenarios/aoi/table1_derived.toml. Re-plot: run `gnuplot reconfigurations.gp` in this directory.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo noenhanced size 480,440
} else {
  set terminal png noenhanced size 480,440
}
set output "reconfigurations.png"
set multiplot layout 1,1 title "P4INC-AOI Table I: 8 units, a load derived from the\nMILP's 3.4 s at 40 jobs: reconfigured AOI connections"
set xlabel "DML jobs"
set ylabel "reconfigured AOI connections"
set yrange [0:*]
set offsets 0, 0, graph 0.05, 0
set grid
set key below horizontal maxcols 2
set bmargin 8
set xtics (40, 50, 60, 80, 100)
set mxtics 1
set ytics 10
set mytics 1
set format y "%.0f"
set title ""
plot "reconfigurations.dat" index 0 using 1:2 with linespoints lc rgb "#000000" pt 13 lw 2 title "MILP", \
     "reconfigurations.dat" index 1 using 1:2 with linespoints lc rgb "#0072B2" pt 5 lw 2 title "INC-FCFS", \
     "reconfigurations.dat" index 2 using 1:2 with linespoints lc rgb "#D55E00" pt 7 lw 2 title "INC-TW", \
     "reconfigurations.dat" index 3 using 1:2 with linespoints lc rgb "#009E73" pt 4 lw 2 title "INC-TW-NoRecon", \
     "reconfigurations.dat" index 4 using 1:2 with linespoints lc rgb "#0072B2" pt 5 lw 2 dt 2 title "INC-FCFS-need", \
     "reconfigurations.dat" index 5 using 1:2 with linespoints lc rgb "#D55E00" pt 7 lw 2 dt 2 title "INC-TW-need", \
     "reconfigurations.dat" index 6 using 1:2 with linespoints lc rgb "#009E73" pt 4 lw 2 dt 2 title "INC-TW-NoRecon-need"
unset multiplot
