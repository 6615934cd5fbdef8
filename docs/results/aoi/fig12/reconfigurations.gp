# reconfigurations of scenarios/aoi/fig12.toml. Re-plot: run `gnuplot reconfigurations.gp` in this directory.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo noenhanced size 960,548
} else {
  set terminal png noenhanced size 960,548
}
set output "reconfigurations.png"
set multiplot layout 1,2 title "P4INC-AOI Fig. 12: TS length: reconfigured AOI connections"
set xlabel "TS length (s)"
set ylabel "reconfigured AOI connections"
set yrange [0:*]
set offsets 0, 0, graph 0.05, 0
set grid
set key below horizontal maxcols 1
set bmargin 14
set ytics 1000
set mytics 1
set format y "%.0f"
set title "20 jobs per s"
plot "reconfigurations.dat" index 0 using 1:2 with linespoints lc rgb "#56B4E9" pt 11 lw 2 title "noINC-FCFS", \
     "reconfigurations.dat" index 1 using 1:2 with linespoints lc rgb "#E69F00" pt 9 lw 2 title "noINC-TW", \
     "reconfigurations.dat" index 2 using 1:2 with linespoints lc rgb "#0072B2" pt 5 lw 2 title "INC-FCFS", \
     "reconfigurations.dat" index 3 using 1:2 with linespoints lc rgb "#D55E00" pt 7 lw 2 title "INC-TW", \
     "reconfigurations.dat" index 4 using 1:2 with linespoints lc rgb "#56B4E9" pt 11 lw 2 dt 2 title "noINC-FCFS-need", \
     "reconfigurations.dat" index 5 using 1:2 with linespoints lc rgb "#E69F00" pt 9 lw 2 dt 2 title "noINC-TW-need", \
     "reconfigurations.dat" index 6 using 1:2 with linespoints lc rgb "#0072B2" pt 5 lw 2 dt 2 title "INC-FCFS-need", \
     "reconfigurations.dat" index 7 using 1:2 with linespoints lc rgb "#D55E00" pt 7 lw 2 dt 2 title "INC-TW-need", \
     "reconfigurations.dat" index 8 using 1:2 with linespoints lc rgb "#44AA99" pt 6 lw 2 title "noINC-FCFS-strict", \
     "reconfigurations.dat" index 9 using 1:2 with linespoints lc rgb "#332288" pt 4 lw 2 title "INC-FCFS-strict"
set title "200 jobs per s"
plot "reconfigurations.dat" index 10 using 1:2 with linespoints lc rgb "#56B4E9" pt 11 lw 2 title "noINC-FCFS", \
     "reconfigurations.dat" index 11 using 1:2 with linespoints lc rgb "#E69F00" pt 9 lw 2 title "noINC-TW", \
     "reconfigurations.dat" index 12 using 1:2 with linespoints lc rgb "#0072B2" pt 5 lw 2 title "INC-FCFS", \
     "reconfigurations.dat" index 13 using 1:2 with linespoints lc rgb "#D55E00" pt 7 lw 2 title "INC-TW", \
     "reconfigurations.dat" index 14 using 1:2 with linespoints lc rgb "#56B4E9" pt 11 lw 2 dt 2 title "noINC-FCFS-need", \
     "reconfigurations.dat" index 15 using 1:2 with linespoints lc rgb "#E69F00" pt 9 lw 2 dt 2 title "noINC-TW-need", \
     "reconfigurations.dat" index 16 using 1:2 with linespoints lc rgb "#0072B2" pt 5 lw 2 dt 2 title "INC-FCFS-need", \
     "reconfigurations.dat" index 17 using 1:2 with linespoints lc rgb "#D55E00" pt 7 lw 2 dt 2 title "INC-TW-need", \
     "reconfigurations.dat" index 18 using 1:2 with linespoints lc rgb "#44AA99" pt 6 lw 2 title "noINC-FCFS-strict", \
     "reconfigurations.dat" index 19 using 1:2 with linespoints lc rgb "#332288" pt 4 lw 2 title "INC-FCFS-strict"
unset multiplot
