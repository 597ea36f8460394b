# bench/plot-scaling.gp - P2: write bandwidth against drive count with the
# limit N x drive bandwidth x k/(k+p) and the 90% target. bench/run calls
#   gnuplot -e "data='FILE'; bw='MB/s'; out='FILE.png'; sub='TEXT'" bench/plot-scaling.gp
# data columns: drives, measured MB/s, limit MB/s, ratio.
set terminal pngcairo size 800,500 font "sans,10"
set output out
set title "P2: write bandwidth vs drive count (10+2, emulated drives of ".bw." MB/s each)\n{/*0.8 ".sub."}"
set xlabel "drives"
set ylabel "user data written, MB/s"
set key top left
set grid
set xrange [0:*]
set yrange [0:*]
plot data using 1:3 with lines lw 2 dt 2 lc rgb "#888888" title "limit: N x drive bw x k/(k+p)", \
     data using 1:($3*0.9) with lines lw 1 dt 3 lc rgb "#cc6666" title "target: 90% of the limit", \
     data using 1:2 with linespoints lw 2 pt 7 lc rgb "#1f5fa8" title "zarray (measured)"
