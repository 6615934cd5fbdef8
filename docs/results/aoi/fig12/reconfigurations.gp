# reconfigurations of scenarios/aoi/fig12.toml. Re-plot: run `gnuplot reconfigurations.gp` in this directory.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo noenhanced size 960,400
} else {
  set terminal png noenhanced size 960,400
}
set output "reconfigurations.png"
set multiplot layout 1,2 title "P4INC-AOI Fig. 12: TS length: reconfigured AOI connections"
set xlabel "TS length (s)"
set ylabel "reconfigured AOI connections"
set yrange [0:*]
set offsets 0, 0, graph 0.3, 0  # headroom for the key
set grid
set key top left
set title "20 jobs per s"
plot "reconfigurations.dat" index 0 using 1:2 with linespoints lc 12 pt 15 title "noINC-FCFS", \
     "reconfigurations.dat" index 1 using 1:2 with linespoints lc 13 pt 7 title "noINC-TW", \
     "reconfigurations.dat" index 2 using 1:2 with linespoints lc 14 pt 5 title "INC-FCFS", \
     "reconfigurations.dat" index 3 using 1:2 with linespoints lc 15 pt 9 title "INC-TW"
set title "200 jobs per s"
plot "reconfigurations.dat" index 4 using 1:2 with linespoints lc 12 pt 15 title "noINC-FCFS", \
     "reconfigurations.dat" index 5 using 1:2 with linespoints lc 13 pt 7 title "noINC-TW", \
     "reconfigurations.dat" index 6 using 1:2 with linespoints lc 14 pt 5 title "INC-FCFS", \
     "reconfigurations.dat" index 7 using 1:2 with linespoints lc 15 pt 9 title "INC-TW"
unset multiplot
