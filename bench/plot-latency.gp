# bench/plot-latency.gp - P7: the 4 KiB write latency distribution of a
# healthy array and of the same array during a rebuild, on a "nines"
# axis (x = -log10(1 - percentile/100)). bench/run calls
#   gnuplot -e "healthy='FILE'; rebuild='FILE'; out='FILE.png'; sub='TEXT'" bench/plot-latency.gp
# data columns (bench/rebuild.sh): percentile, latency in microseconds.
set terminal pngcairo size 800,500 font "sans,10"
set output out
set title "P7: 4 KiB write latency, healthy vs during rebuild\n{/*0.8 ".sub."}"
set xlabel "percentile"
set ylabel "latency, ms"
set format y "%g"
set logscale y
set key top left
set grid
nines(p) = -log10(1 - p / 100.0)
set xtics ("50" nines(50), "90" nines(90), "99" nines(99), "99.9" nines(99.9), \
           "99.99" nines(99.99))
set xrange [0:4.2]
set rmargin 5
plot healthy using (nines($1)):($2/1000) with linespoints lw 2 pt 7 lc rgb "#1f5fa8" title "healthy", \
     rebuild using (nines($1)):($2/1000) with linespoints lw 2 pt 5 lc rgb "#c05020" title "during rebuild"
