# retransmits of scenarios/aoi/fig5_inc.toml. Re-plot: run `gnuplot retransmits.gp` in this directory.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo noenhanced size 2880,400
} else {
  set terminal png noenhanced size 2880,400
}
set output "retransmits.png"
set multiplot layout 1,6 title "P4INC-AOI Fig. 5: one INC allreduce per model, 2 workers at 40 Gbps: retransmits"
set xlabel ""
set ylabel "retransmits"
set yrange [0:*]
set offsets 0, 0, graph 0.05, 0
set grid
unset key
set ytics 1
set mytics 1
set format y "%.0f"
set xtics ("p4inc-aoi" 0)
set xrange [-0.5:0.5]
set boxwidth 0.6
set style fill solid 0.6
set title "ResNet50"
plot "retransmits.dat" index 0 using 1:2 with boxes lc rgb "#D55E00" pt 5 lw 2 notitle
set title "ResNet101"
plot "retransmits.dat" index 1 using 1:2 with boxes lc rgb "#D55E00" pt 5 lw 2 notitle
set title "ResNet152"
plot "retransmits.dat" index 2 using 1:2 with boxes lc rgb "#D55E00" pt 5 lw 2 notitle
set title "VGG11"
plot "retransmits.dat" index 3 using 1:2 with boxes lc rgb "#D55E00" pt 5 lw 2 notitle
set title "VGG16"
plot "retransmits.dat" index 4 using 1:2 with boxes lc rgb "#D55E00" pt 5 lw 2 notitle
set title "VGG19"
plot "retransmits.dat" index 5 using 1:2 with boxes lc rgb "#D55E00" pt 5 lw 2 notitle
unset multiplot
