# iteration_ms of scenarios/rina/testbed.toml. Re-plot: run `gnuplot iteration_ms.gp` in this directory.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo noenhanced size 480,400
} else {
  set terminal png noenhanced size 480,400
}
set output "iteration_ms.png"
set multiplot layout 1,1 title "Rina testbed (2 racks x 4 workers): throughput vs INA\nToRs"
set xlabel "INA switches (planner's order)"
set ylabel "iteration_ms"
set yrange [0:*]
set offsets 0, 0, graph 0.3, 0  # headroom for the key
set grid
set key top left
set title ""
plot "iteration_ms.dat" index 0 using 1:2 with linespoints lc 6 pt 15 title "ps", \
     "iteration_ms.dat" index 1 using 1:2 with linespoints lc 7 pt 7 title "rar", \
     "iteration_ms.dat" index 2 using 1:2 with linespoints lc 8 pt 5 title "h-ar", \
     "iteration_ms.dat" index 3 using 1:2 with linespoints lc 2 pt 5 title "atp", \
     "iteration_ms.dat" index 4 using 1:2 with linespoints lc 9 pt 9 title "rina"
unset multiplot
