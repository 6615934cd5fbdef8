# throughput_gbps of scenarios/rina/fig10.toml. Re-plot: run `gnuplot throughput_gbps.gp` in this directory.
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo noenhanced size 4800,400
} else {
  set terminal png noenhanced size 4800,400
}
set output "throughput_gbps.png"
set multiplot layout 1,10 title "Rina Fig. 10: throughput per worker vs % INA switches"
set xlabel "INA switches (%)"
set ylabel "throughput per worker (Gbps)"
set yrange [0:*]
set offsets 0, 0, graph 0.3, 0  # headroom for the key
set grid
set key top left
set title "fat-tree ResNet50"
plot "throughput_gbps.dat" index 0 using 1:2 with linespoints lc 6 pt 15 title "ps", \
     "throughput_gbps.dat" index 1 using 1:2 with linespoints lc 7 pt 7 title "rar", \
     "throughput_gbps.dat" index 2 using 1:2 with linespoints lc 8 pt 5 title "h-ar", \
     "throughput_gbps.dat" index 3 using 1:2 with linespoints lc 2 pt 5 title "atp", \
     "throughput_gbps.dat" index 4 using 1:2 with linespoints lc 9 pt 9 title "rina"
set title "fat-tree VGG16"
plot "throughput_gbps.dat" index 5 using 1:2 with linespoints lc 6 pt 15 title "ps", \
     "throughput_gbps.dat" index 6 using 1:2 with linespoints lc 7 pt 7 title "rar", \
     "throughput_gbps.dat" index 7 using 1:2 with linespoints lc 8 pt 5 title "h-ar", \
     "throughput_gbps.dat" index 8 using 1:2 with linespoints lc 2 pt 5 title "atp", \
     "throughput_gbps.dat" index 9 using 1:2 with linespoints lc 9 pt 9 title "rina"
set title "fat-tree InceptionV3"
plot "throughput_gbps.dat" index 10 using 1:2 with linespoints lc 6 pt 15 title "ps", \
     "throughput_gbps.dat" index 11 using 1:2 with linespoints lc 7 pt 7 title "rar", \
     "throughput_gbps.dat" index 12 using 1:2 with linespoints lc 8 pt 5 title "h-ar", \
     "throughput_gbps.dat" index 13 using 1:2 with linespoints lc 2 pt 5 title "atp", \
     "throughput_gbps.dat" index 14 using 1:2 with linespoints lc 9 pt 9 title "rina"
set title "fat-tree ResNet101"
plot "throughput_gbps.dat" index 15 using 1:2 with linespoints lc 6 pt 15 title "ps", \
     "throughput_gbps.dat" index 16 using 1:2 with linespoints lc 7 pt 7 title "rar", \
     "throughput_gbps.dat" index 17 using 1:2 with linespoints lc 8 pt 5 title "h-ar", \
     "throughput_gbps.dat" index 18 using 1:2 with linespoints lc 2 pt 5 title "atp", \
     "throughput_gbps.dat" index 19 using 1:2 with linespoints lc 9 pt 9 title "rina"
set title "fat-tree BERT-base"
plot "throughput_gbps.dat" index 20 using 1:2 with linespoints lc 6 pt 15 title "ps", \
     "throughput_gbps.dat" index 21 using 1:2 with linespoints lc 7 pt 7 title "rar", \
     "throughput_gbps.dat" index 22 using 1:2 with linespoints lc 8 pt 5 title "h-ar", \
     "throughput_gbps.dat" index 23 using 1:2 with linespoints lc 2 pt 5 title "atp", \
     "throughput_gbps.dat" index 24 using 1:2 with linespoints lc 9 pt 9 title "rina"
set title "dragonfly ResNet50"
plot "throughput_gbps.dat" index 25 using 1:2 with linespoints lc 6 pt 15 title "ps", \
     "throughput_gbps.dat" index 26 using 1:2 with linespoints lc 7 pt 7 title "rar", \
     "throughput_gbps.dat" index 27 using 1:2 with linespoints lc 8 pt 5 title "h-ar", \
     "throughput_gbps.dat" index 28 using 1:2 with linespoints lc 2 pt 5 title "atp", \
     "throughput_gbps.dat" index 29 using 1:2 with linespoints lc 9 pt 9 title "rina"
set title "dragonfly VGG16"
plot "throughput_gbps.dat" index 30 using 1:2 with linespoints lc 6 pt 15 title "ps", \
     "throughput_gbps.dat" index 31 using 1:2 with linespoints lc 7 pt 7 title "rar", \
     "throughput_gbps.dat" index 32 using 1:2 with linespoints lc 8 pt 5 title "h-ar", \
     "throughput_gbps.dat" index 33 using 1:2 with linespoints lc 2 pt 5 title "atp", \
     "throughput_gbps.dat" index 34 using 1:2 with linespoints lc 9 pt 9 title "rina"
set title "dragonfly InceptionV3"
plot "throughput_gbps.dat" index 35 using 1:2 with linespoints lc 6 pt 15 title "ps", \
     "throughput_gbps.dat" index 36 using 1:2 with linespoints lc 7 pt 7 title "rar", \
     "throughput_gbps.dat" index 37 using 1:2 with linespoints lc 8 pt 5 title "h-ar", \
     "throughput_gbps.dat" index 38 using 1:2 with linespoints lc 2 pt 5 title "atp", \
     "throughput_gbps.dat" index 39 using 1:2 with linespoints lc 9 pt 9 title "rina"
set title "dragonfly ResNet101"
plot "throughput_gbps.dat" index 40 using 1:2 with linespoints lc 6 pt 15 title "ps", \
     "throughput_gbps.dat" index 41 using 1:2 with linespoints lc 7 pt 7 title "rar", \
     "throughput_gbps.dat" index 42 using 1:2 with linespoints lc 8 pt 5 title "h-ar", \
     "throughput_gbps.dat" index 43 using 1:2 with linespoints lc 2 pt 5 title "atp", \
     "throughput_gbps.dat" index 44 using 1:2 with linespoints lc 9 pt 9 title "rina"
set title "dragonfly BERT-base"
plot "throughput_gbps.dat" index 45 using 1:2 with linespoints lc 6 pt 15 title "ps", \
     "throughput_gbps.dat" index 46 using 1:2 with linespoints lc 7 pt 7 title "rar", \
     "throughput_gbps.dat" index 47 using 1:2 with linespoints lc 8 pt 5 title "h-ar", \
     "throughput_gbps.dat" index 48 using 1:2 with linespoints lc 2 pt 5 title "atp", \
     "throughput_gbps.dat" index 49 using 1:2 with linespoints lc 9 pt 9 title "rina"
unset multiplot
