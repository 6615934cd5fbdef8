# reconfigurations of scenarios/aoi/table1.toml. Re-plot: run `gnuplot reconfigurations.gp` in this directory.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo noenhanced size 960,400
} else {
  set terminal png noenhanced size 960,400
}
set output "reconfigurations.png"
set multiplot layout 1,2 title "P4INC-AOI Table I: 8 units: reconfigured AOI connections"
set xlabel "DML jobs"
set ylabel "reconfigured AOI connections"
set yrange [0:*]
set offsets 0, 0, graph 0.3, 0  # headroom for the key
set grid
set key top left
set title "20 jobs per TS"
plot "reconfigurations.dat" index 0 using 1:2 with linespoints lc 13 pt 7 title "MILP", \
     "reconfigurations.dat" index 1 using 1:2 with linespoints lc 14 pt 5 title "INC-FCFS", \
     "reconfigurations.dat" index 2 using 1:2 with linespoints lc 15 pt 9 title "INC-TW", \
     "reconfigurations.dat" index 3 using 1:2 with linespoints lc 16 pt 13 title "INC-TW-NoRecon"
set title "200 jobs per TS"
plot "reconfigurations.dat" index 4 using 1:2 with linespoints lc 13 pt 7 title "MILP", \
     "reconfigurations.dat" index 5 using 1:2 with linespoints lc 14 pt 5 title "INC-FCFS", \
     "reconfigurations.dat" index 6 using 1:2 with linespoints lc 15 pt 9 title "INC-TW", \
     "reconfigurations.dat" index 7 using 1:2 with linespoints lc 16 pt 13 title "INC-TW-NoRecon"
unset multiplot
