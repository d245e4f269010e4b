# svcgen: bring the node's IPVS table to the wanted one, touching only what differs.
# "ipvsadm -R" cannot add a service that exists, and "ipvsadm -C" would drop every
# service (other users' too) and every connection; this prints the commands that
# remain, which the script feeds to "ipvsadm -R", and tells each on stderr.
#
# Input, in three parts split by a line "%%": the wanted "ipvsadm -Sn" lines; the
# node's "ipvsadm -Sn"; the node's "ipvsadm -Ln" (for connection counts).
# Variables: family (4 or 6) is the family this script owns; exclude lists CIDRs whose
# services belong to someone else.
#
# Like kube-proxy: services of the family that are not wanted are deleted (never one
# in exclude, never one of the other family or a firewall-mark service); changed
# services and real servers are edited in place; a TCP real server that is no longer
# wanted but still has connections drains at weight 0 and is deleted by a later run
# once it has none; a wanted real server found at another weight is set back.

function tell(cmd) {
	print cmd
	print "svcgen: ipvsadm " cmd | "cat 1>&2"
}

function hex(s,    i, v) {
	v = 0
	s = tolower(s)
	for (i = 1; i <= length(s); i++)
		v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
	return v
}

# expand6 fills g[1..8] with the groups of an IPv6 address.
function expand6(a, g,    at, head, tail, h, t, nh, nt, i) {
	at = index(a, "::")
	head = a
	tail = ""
	if (at) {
		head = substr(a, 1, at - 1)
		tail = substr(a, at + 2)
	}
	nh = (head == "") ? 0 : split(head, h, ":")
	nt = (tail == "") ? 0 : split(tail, t, ":")
	for (i = 1; i <= 8; i++)
		g[i] = 0
	for (i = 1; i <= nh; i++)
		g[i] = hex(h[i])
	for (i = 1; i <= nt; i++)
		g[8 - nt + i] = hex(t[i])
	return 8
}

function incidr(a, c,    net, bits, n, i, x, y, w, m) {
	bits = c
	sub(/^.*\//, "", bits)
	bits += 0
	net = c
	sub(/\/.*$/, "", net)
	if ((a ~ /:/) != (net ~ /:/))
		return 0
	if (a ~ /:/) {
		n = expand6(a, x)
		expand6(net, y)
		w = 16
	} else {
		n = split(a, x, ".")
		split(net, y, ".")
		w = 8
	}
	for (i = 1; i <= n && bits > 0; i++) {
		m = (bits >= w) ? 1 : 2 ^ (w - bits)
		if (int(x[i] / m) != int(y[i] / m))
			return 0
		bits -= w
	}
	return 1
}

# owned: the service of key k ("-t 10.0.0.1:80") is this script's to delete.
function owned(k,    a, n, i, ex) {
	if (k ~ /^-f /)
		return 0
	a = k
	sub(/^[^ ]+ /, "", a)
	if (a ~ /^\[/) {
		if (family != 6)
			return 0
		sub(/^\[/, "", a)
		sub(/\]:[0-9]+$/, "", a)
	} else {
		if (family != 4)
			return 0
		sub(/:[0-9]+$/, "", a)
	}
	n = split(exclude, ex, " ")
	for (i = 1; i <= n; i++)
		if (incidr(a, ex[i]))
			return 0
	return 1
}

$0 == "%%" { part++; next }
NF == 0 { next }
part == 0 && $1 == "-A" { k = $2 " " $3; want[k] = $0; wantk[++wantn] = k; next }
part == 0 && $1 == "-a" { k = $2 " " $3 " " $5; wreal[k] = $0; wrealk[++wrealn] = k; next }
part == 1 && $1 == "-A" { k = $2 " " $3; have[k] = $0; havek[++haven] = k; next }
part == 1 && $1 == "-a" {
	k = $2 " " $3 " " $5
	hreal[k] = $0
	hrealk[++hrealn] = k
	hsvc[k] = $2 " " $3
	hrs[k] = $5
	hfwd[k] = $6
	hweight[k] = $8
	next
}
part == 2 && ($1 == "TCP" || $1 == "UDP" || $1 == "SCTP") {
	cur = (($1 == "TCP") ? "-t" : (($1 == "UDP") ? "-u" : "--sctp-service")) " " $2
	next
}
part == 2 && $1 == "->" && $2 != "RemoteAddress:Port" { conns[cur " " $2] = $5 + $6; next }

END {
	for (i = 1; i <= haven; i++) {
		k = havek[i]
		if (!(k in want) && owned(k))
			tell("-D " k)
	}
	for (i = 1; i <= wantn; i++) {
		k = wantk[i]
		if (!(k in have))
			tell(want[k])
		else if (have[k] != want[k])
			tell("-E" substr(want[k], 3))
	}
	for (i = 1; i <= hrealn; i++) {
		k = hrealk[i]
		if ((k in wreal) || !(hsvc[k] in want))
			continue
		if (hsvc[k] ~ /^-t / && conns[k] > 0) {
			if (hweight[k] != 0)
				tell("-e " hsvc[k] " -r " hrs[k] " " hfwd[k] " -w 0")
		} else
			tell("-d " hsvc[k] " -r " hrs[k])
	}
	for (i = 1; i <= wrealn; i++) {
		k = wrealk[i]
		if (!(k in hreal))
			tell(wreal[k])
		else if (hreal[k] != wreal[k])
			tell("-e" substr(wreal[k], 3))
	}
}
