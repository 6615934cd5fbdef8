# ct_bti_s of scenarios/aoi/table1.toml. Re-plot: run `gnuplot ct_bti_s.gp` in this directory.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo noenhanced size 960,440
} else {
  set terminal png noenhanced size 960,440
}
set output "ct_bti_s.png"
set multiplot layout 1,2 title "P4INC-AOI Table I: 8 units: CT-BTI (s)"
set xlabel "DML jobs"
set ylabel "CT-BTI (s)"
set yrange [0:*]
set offsets 0, 0, graph 0.05, 0
set grid
set key below horizontal maxcols 2
set bmargin 5
set xtics (40, 50, 60, 80, 100)
set mxtics 1
set title "20 jobs per TS"
plot "ct_bti_s.dat" index 0 using 1:2 with linespoints lc rgb "#0072B2" pt 5 lw 2 title "INC-FCFS", \
     "ct_bti_s.dat" index 1 using 1:2 with linespoints lc rgb "#332288" pt 4 lw 2 title "INC-FCFS-strict"
set title "200 jobs per TS"
plot "ct_bti_s.dat" index 2 using 1:2 with linespoints lc rgb "#0072B2" pt 5 lw 2 title "INC-FCFS", \
     "ct_bti_s.dat" index 3 using 1:2 with linespoints lc rgb "#332288" pt 4 lw 2 title "INC-FCFS-strict"
unset multiplot
