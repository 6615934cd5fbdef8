# total_jct_s of scenarios/aoi/variant/testbed_resnet50_fig5_ps.toml. Re-plot: run `gnuplot total_jct_s.gp` in this directory.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo noenhanced size 480,440
} else {
  set terminal png noenhanced size 480,440
}
set output "total_jct_s.png"
set multiplot layout 1,1 title "P4INC-AOI testbed, PS at 15.8 Gbps (variant), ResNet50:\ntotal JCT (s)"
set xlabel "concurrent DML jobs"
set ylabel "total JCT (s)"
set yrange [0:*]
set offsets 0, 0, graph 0.05, 0
set grid
set key below horizontal maxcols 2
set bmargin 8
set xtics (10, 20, 40, 60)
set mxtics 1
set title ""
plot "total_jct_s.dat" index 0 using 1:2 with linespoints lc rgb "#56B4E9" pt 11 lw 2 title "noINC-FCFS", \
     "total_jct_s.dat" index 1 using 1:2 with linespoints lc rgb "#E69F00" pt 9 lw 2 title "noINC-TW", \
     "total_jct_s.dat" index 2 using 1:2 with linespoints lc rgb "#0072B2" pt 5 lw 2 title "INC-FCFS", \
     "total_jct_s.dat" index 3 using 1:2 with linespoints lc rgb "#D55E00" pt 7 lw 2 title "INC-TW", \
     "total_jct_s.dat" index 4 using 1:2 with linespoints lc rgb "#56B4E9" pt 11 lw 2 dt 2 title "noINC-FCFS-need", \
     "total_jct_s.dat" index 5 using 1:2 with linespoints lc rgb "#E69F00" pt 9 lw 2 dt 2 title "noINC-TW-need", \
     "total_jct_s.dat" index 6 using 1:2 with linespoints lc rgb "#0072B2" pt 5 lw 2 dt 2 title "INC-FCFS-need", \
     "total_jct_s.dat" index 7 using 1:2 with linespoints lc rgb "#D55E00" pt 7 lw 2 dt 2 title "INC-TW-need"
unset multiplot
