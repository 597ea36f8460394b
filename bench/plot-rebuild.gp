# bench/plot-rebuild.gp - P3: rebuild progress over time next to the limit
# set by the survivors' bandwidth. bench/run calls
#   gnuplot -e "data='FILE'; out='FILE.png'; sub='TEXT'" bench/plot-rebuild.gp
# data columns (bench/rebuild.sh): seconds, done fraction, limit fraction.
set terminal pngcairo size 800,500 font "sans,10"
set output out
set title "P3: rebuild progress after one drive failure\n{/*0.8 ".sub."}"
set xlabel "seconds since the failure"
set ylabel "live data restored, %"
set key bottom right
set grid
set xrange [0:*]
set yrange [0:105]
plot data using 1:(100*$3) with lines lw 2 dt 2 lc rgb "#888888" title "limit (survivor bandwidth)", \
     data using 1:(100*$2) with lines lw 2 lc rgb "#1f5fa8" title "zarray (measured)"
