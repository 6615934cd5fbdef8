set terminal pngcairo size 960,520 font "sans,11"
set output 'throughput_gbps.png'
set title "Rina Fig. 10, fat-tree k = 4, full-size gradients (16 workers)"
set ylabel "throughput per worker (Gbps)"
set xlabel "model"
set yrange [0:68]
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set key inside top left horizontal reverse Left maxrows 1 font ",10" samplen 1.5 width 1
set grid ytics
plot 'throughput_gbps.dat' using 2:xtic(1) title 'PS', '' using 3 title 'RAR', '' using 4 title 'H-AR', \
     '' using 5 title 'ATP 50%', '' using 6 title 'Rina 50%', '' using 7 title 'ATP 100%', '' using 8 title 'Rina 100%'
