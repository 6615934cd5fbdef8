# Re-plot: gnuplot eq1_vs_sim_barrier.gp (in this directory). Data: eq1_vs_sim_barrier.dat (scripts/rina-straggler-table --barrier).
set terminal pngcairo size 900,560 font ",11"
set output "eq1_vs_sim_barrier.png"
set title "Straggler time added to one 1 MiB allreduce with a barrier per ring step, sigma = 200 us\n(leaf-spine, racks of 8, k = 3200 us; simulator: mean of 3 seeds)"
set xlabel "workers N (Rina: G = N/8 groups, at least 1)"
set ylabel "added time over sigma = 0 (ms)"
set logscale xy 2
set xrange [3.6:72]
set xtics (4, 8, 16, 32, 64)
set key bottom right
set grid
plot "eq1_vs_sim_barrier.dat" using 1:2 with linespoints lw 2 dt 2 title "Eq. 1: 2(N-1) sigma sqrt(2 ln N)", \
     "" using 1:3 with linespoints lw 2 title "barrier per step (Monte Carlo)", \
     "" using 1:4:5 with yerrorlines lw 2 title "simulator: RAR with barrier", \
     "" using 1:6:7 with yerrorlines lw 2 dt 3 title "simulator: RAR without barrier", \
     "" using 1:8 with linespoints lw 2 dt 2 title "Rina with barrier (Monte Carlo)", \
     "" using 1:9:10 with yerrorlines lw 2 title "simulator: Rina with barrier, every ToR INA"
