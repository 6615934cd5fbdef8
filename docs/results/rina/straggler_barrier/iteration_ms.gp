# iteration_ms of scenarios/rina/straggler_barrier.toml. Re-plot: run `gnuplot iteration_ms.gp` in this directory.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo noenhanced size 2400,400
} else {
  set terminal png noenhanced size 2400,400
}
set output "iteration_ms.png"
set multiplot layout 1,5 title "Stragglers (Eq. 1) with a barrier per ring step: iteration time vs per-step sigma"
set xlabel "sigma per step (us)"
set ylabel "iteration time (ms), barrier per step"
set yrange [0:*]
set offsets 0, 0, graph 0.3, 0  # headroom for the key
set grid
set key top left
set title "N=4 (G=1)"
plot "iteration_ms.dat" index 0 using 1:2 with linespoints lc 7 pt 7 title "rar", \
     "iteration_ms.dat" index 1 using 1:2 with linespoints lc 9 pt 9 title "rina"
set title "N=8 (G=1)"
plot "iteration_ms.dat" index 2 using 1:2 with linespoints lc 7 pt 7 title "rar", \
     "iteration_ms.dat" index 3 using 1:2 with linespoints lc 9 pt 9 title "rina"
set title "N=16 (G=2)"
plot "iteration_ms.dat" index 4 using 1:2 with linespoints lc 7 pt 7 title "rar", \
     "iteration_ms.dat" index 5 using 1:2 with linespoints lc 9 pt 9 title "rina"
set title "N=32 (G=4)"
plot "iteration_ms.dat" index 6 using 1:2 with linespoints lc 7 pt 7 title "rar", \
     "iteration_ms.dat" index 7 using 1:2 with linespoints lc 9 pt 9 title "rina"
set title "N=64 (G=8)"
plot "iteration_ms.dat" index 8 using 1:2 with linespoints lc 7 pt 7 title "rar", \
     "iteration_ms.dat" index 9 using 1:2 with linespoints lc 9 pt 9 title "rina"
unset multiplot
