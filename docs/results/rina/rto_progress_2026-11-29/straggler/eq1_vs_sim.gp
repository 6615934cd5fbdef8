# Re-plot: gnuplot eq1_vs_sim.gp (in this directory). Data: eq1_vs_sim.dat (scripts/rina-straggler-table).
set terminal pngcairo size 900,560 font ",11"
set output "eq1_vs_sim.png"
set title "Straggler time added to one 1 MiB allreduce, sigma = 200 us per step\n(leaf-spine, racks of 8, k = 3200 us; simulator: mean of 3 seeds)"
set xlabel "workers N (Rina: G = N/8 groups, at least 1)"
set ylabel "added time over sigma = 0 (ms)"
set logscale xy 2
set xtics (4, 8, 16, 32, 64)
set key top left
set grid
plot "eq1_vs_sim.dat" using 1:2 with linespoints lw 2 dt 2 title "Eq. 1: 2(N-1) sigma sqrt(2 ln N)", \
     "" using 1:3 with linespoints lw 2 title "barrier per step (Monte Carlo)", \
     "" using 1:4 with linespoints lw 2 title "ring chain, no barrier (Monte Carlo)", \
     "" using 1:5:6 with yerrorlines lw 2 title "simulator: RAR", \
     "" using 1:7 with linespoints lw 2 dt 3 title "Rina group chain (Monte Carlo)", \
     "" using 1:8:9 with yerrorlines lw 2 title "simulator: Rina, every ToR INA"
