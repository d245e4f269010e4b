# svcgen: the "ip -batch" commands that leave kube-ipvs0 with exactly the wanted
# addresses. Input: the wanted prefixes, one a line, then "%%", then "ip -o addr show
# dev kube-ipvs0" of the script's family.
$0 == "%%" { part = 1; next }
part == 0 { if (NF) { want[$1] = 1; wantk[++n] = $1 } next }
{ have[$4] = 1; if (!($4 in want)) print "address del " $4 " dev kube-ipvs0" }
END { for (i = 1; i <= n; i++) if (!(wantk[i] in have)) print "address add " wantk[i] " dev kube-ipvs0" }
