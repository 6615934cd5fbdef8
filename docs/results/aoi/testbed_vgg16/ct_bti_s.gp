# ct_bti_s of scenarios/aoi/testbed_vgg16.toml. Re-plot: run `gnuplot ct_bti_s.gp` in this directory.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo noenhanced size 480,400
} else {
  set terminal png noenhanced size 480,400
}
set output "ct_bti_s.png"
set multiplot layout 1,1 title "P4INC-AOI testbed (simulated), vgg16: CT-BTI (s)"
set xlabel "concurrent DML jobs"
set ylabel "CT-BTI (s)"
set yrange [0:*]
set offsets 0, 0, graph 0.3, 0  # headroom for the key
set grid
set key top left
set title ""
plot "ct_bti_s.dat" index 0 using 1:2 with linespoints lc 12 pt 15 title "noINC-FCFS", \
     "ct_bti_s.dat" index 1 using 1:2 with linespoints lc 13 pt 7 title "noINC-TW", \
     "ct_bti_s.dat" index 2 using 1:2 with linespoints lc 14 pt 5 title "INC-FCFS", \
     "ct_bti_s.dat" index 3 using 1:2 with linespoints lc 15 pt 9 title "INC-TW"
unset multiplot
