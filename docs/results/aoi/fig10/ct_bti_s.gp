# ct_bti_s of scenarios/aoi/fig10.toml. Re-plot: run `gnuplot ct_bti_s.gp` in this directory.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo noenhanced size 960,548
} else {
  set terminal png noenhanced size 960,548
}
set output "ct_bti_s.png"
set multiplot layout 1,2 title "P4INC-AOI Fig. 10: 1000 DML jobs, units: CT-BTI (s)"
set xlabel "units"
set ylabel "CT-BTI (s)"
set yrange [0:*]
set offsets 0, 0, graph 0.05, 0
set grid
set key below horizontal maxcols 1
set bmargin 14
set xtics (16, 32, 48, 64)
set mxtics 1
set title "20 jobs per TS"
plot "ct_bti_s.dat" index 0 using 1:2 with linespoints lc rgb "#56B4E9" pt 11 lw 2 title "noINC-FCFS", \
     "ct_bti_s.dat" index 1 using 1:2 with linespoints lc rgb "#E69F00" pt 9 lw 2 title "noINC-TW", \
     "ct_bti_s.dat" index 2 using 1:2 with linespoints lc rgb "#0072B2" pt 5 lw 2 title "INC-FCFS", \
     "ct_bti_s.dat" index 3 using 1:2 with linespoints lc rgb "#D55E00" pt 7 lw 2 title "INC-TW", \
     "ct_bti_s.dat" index 4 using 1:2 with linespoints lc rgb "#56B4E9" pt 11 lw 2 dt 2 title "noINC-FCFS-need", \
     "ct_bti_s.dat" index 5 using 1:2 with linespoints lc rgb "#E69F00" pt 9 lw 2 dt 2 title "noINC-TW-need", \
     "ct_bti_s.dat" index 6 using 1:2 with linespoints lc rgb "#0072B2" pt 5 lw 2 dt 2 title "INC-FCFS-need", \
     "ct_bti_s.dat" index 7 using 1:2 with linespoints lc rgb "#D55E00" pt 7 lw 2 dt 2 title "INC-TW-need", \
     "ct_bti_s.dat" index 8 using 1:2 with linespoints lc rgb "#44AA99" pt 6 lw 2 title "noINC-FCFS-strict", \
     "ct_bti_s.dat" index 9 using 1:2 with linespoints lc rgb "#332288" pt 4 lw 2 title "INC-FCFS-strict"
set title "200 jobs per TS"
plot "ct_bti_s.dat" index 10 using 1:2 with linespoints lc rgb "#56B4E9" pt 11 lw 2 title "noINC-FCFS", \
     "ct_bti_s.dat" index 11 using 1:2 with linespoints lc rgb "#E69F00" pt 9 lw 2 title "noINC-TW", \
     "ct_bti_s.dat" index 12 using 1:2 with linespoints lc rgb "#0072B2" pt 5 lw 2 title "INC-FCFS", \
     "ct_bti_s.dat" index 13 using 1:2 with linespoints lc rgb "#D55E00" pt 7 lw 2 title "INC-TW", \
     "ct_bti_s.dat" index 14 using 1:2 with linespoints lc rgb "#56B4E9" pt 11 lw 2 dt 2 title "noINC-FCFS-need", \
     "ct_bti_s.dat" index 15 using 1:2 with linespoints lc rgb "#E69F00" pt 9 lw 2 dt 2 title "noINC-TW-need", \
     "ct_bti_s.dat" index 16 using 1:2 with linespoints lc rgb "#0072B2" pt 5 lw 2 dt 2 title "INC-FCFS-need", \
     "ct_bti_s.dat" index 17 using 1:2 with linespoints lc rgb "#D55E00" pt 7 lw 2 dt 2 title "INC-TW-need", \
     "ct_bti_s.dat" index 18 using 1:2 with linespoints lc rgb "#44AA99" pt 6 lw 2 title "noINC-FCFS-strict", \
     "ct_bti_s.dat" index 19 using 1:2 with linespoints lc rgb "#332288" pt 4 lw 2 title "INC-FCFS-strict"
unset multiplot
