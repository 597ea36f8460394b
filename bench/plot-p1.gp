# bench/plot-p1.gp - P1: NBD write throughput of the zarray export and of
# nbdkit (memory, and file on the same tmpfs), same client, same run.
# bench/run calls
#   gnuplot -e "data='FILE'; out='FILE.png'; sub='TEXT'" bench/plot-p1.gp
# data columns: "workload", zarray MB/s, nbdkit memory MB/s, nbdkit file MB/s.
set terminal pngcairo size 800,500 font "sans,10"
set output out
set title "P1: NBD write throughput, same client (fio --ioengine=nbd)\n{/*0.8 ".sub."}"
set ylabel "MB/s"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key outside bottom center horizontal
set grid ytics
set yrange [0:*]
plot data using 2:xtic(1) lc rgb "#1f5fa8" title "zarray (10+2, 12 drives)", \
     data using 3 lc rgb "#888888" title "nbdkit memory", \
     data using 4 lc rgb "#bbbbbb" title "nbdkit file (tmpfs)"
