# throughput_gbps of scenarios/rina/fig11.toml. Re-plot: run `gnuplot throughput_gbps.gp` in this directory.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo noenhanced size 480,400
} else {
  set terminal png noenhanced size 480,400
}
set output "throughput_gbps.png"
set multiplot layout 1,1 title "Rina Fig. 11: fat-tree k=4, ResNet50, throughput vs INA\nswitches"
set xlabel "INA switches (planner's order)"
set ylabel "throughput per worker (Gbps)"
set yrange [0:*]
set offsets 0, 0, graph 0.3, 0  # headroom for the key
set grid
set key top left
set title ""
plot "throughput_gbps.dat" index 0 using 1:2 with linespoints lc 2 pt 5 title "atp", \
     "throughput_gbps.dat" index 1 using 1:2 with linespoints lc 9 pt 9 title "rina"
unset multiplot
