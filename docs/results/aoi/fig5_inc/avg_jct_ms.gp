# avg_jct_ms of scenarios/aoi/fig5_inc.toml. Re-plot: run `gnuplot avg_jct_ms.gp` in this directory.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo noenhanced size 2880,400
} else {
  set terminal png noenhanced size 2880,400
}
set output "avg_jct_ms.png"
set multiplot layout 1,6 title "P4INC-AOI Fig. 5: one INC allreduce per model, 2 workers at 40 Gbps: average JCT (ms)"
set xlabel ""
set ylabel "average JCT (ms)"
set yrange [0:*]
set offsets 0, 0, graph 0.05, 0
set grid
unset key
set xtics ("p4inc-aoi" 0)
set xrange [-0.5:0.5]
set boxwidth 0.6
set style fill solid 0.6
set title "ResNet50"
plot "avg_jct_ms.dat" index 0 using 1:2 with boxes lc rgb "#D55E00" pt 5 lw 2 notitle
set title "ResNet101"
plot "avg_jct_ms.dat" index 1 using 1:2 with boxes lc rgb "#D55E00" pt 5 lw 2 notitle
set title "ResNet152"
plot "avg_jct_ms.dat" index 2 using 1:2 with boxes lc rgb "#D55E00" pt 5 lw 2 notitle
set title "VGG11"
plot "avg_jct_ms.dat" index 3 using 1:2 with boxes lc rgb "#D55E00" pt 5 lw 2 notitle
set title "VGG16"
plot "avg_jct_ms.dat" index 4 using 1:2 with boxes lc rgb "#D55E00" pt 5 lw 2 notitle
set title "VGG19"
plot "avg_jct_ms.dat" index 5 using 1:2 with boxes lc rgb "#D55E00" pt 5 lw 2 notitle
unset multiplot
