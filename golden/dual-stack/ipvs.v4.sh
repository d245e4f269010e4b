#!/bin/sh
# kube-proxy v1.37 ipvs rules for node node1 (IPv4), written by svcgen.
# Run it as root. Running it again changes only what differs from this state.
set -eu

# Virtual servers:
#   TCP 198.18.0.1:30080  shop/web:http node port
#   TCP 198.19.0.10:80  shop/v4only:http cluster IP
#   TCP 198.19.0.132:80  shop/web:http cluster IP
#   UDP 198.19.0.52:53  kube-system/dns:dns cluster IP

# Kernel settings (kube-proxy's NewProxier).
sysctl -q -w net.ipv4.vs.conntrack=1
sysctl -q -w net.ipv4.vs.expire_nodest_conn=1
sysctl -q -w net.ipv4.vs.expire_quiescent_template=1
sysctl -q -w net.ipv4.ip_forward=1
# conn_reuse_mode=0 only on kernels 4.1 to 5.8 (kubernetes #93297); kube-proxy reads the running kernel too.
case "$(uname -r)" in 4.[1-9]*|5.[0-8].*) sysctl -q -w net.ipv4.vs.conn_reuse_mode=0 ;; esac

# The dummy interface: every virtual address as a host address, nothing else.
ip link show kube-ipvs0 >/dev/null 2>&1 || ip link add kube-ipvs0 type dummy
{
cat <<'SVCGEN_ADDRESSES'
198.19.0.10/32
198.19.0.52/32
198.19.0.132/32
SVCGEN_ADDRESSES
echo %%
ip -o -4 addr show dev kube-ipvs0
} | awk '$0 == "%%" { part = 1; next }
part == 0 { if (NF) { want[$1] = 1; wantk[++n] = $1 } next }
{ have[$4] = 1; if (!($4 in want)) print "address del " $4 " dev kube-ipvs0" }
END { for (i = 1; i <= n; i++) if (!(wantk[i] in have)) print "address add " wantk[i] " dev kube-ipvs0" }' | ip -batch -

# The sets, each refilled in one swap.
ipset destroy svcgen-tmp 2>/dev/null || :
ipset restore -exist <<'SVCGEN_IPSET'
create KUBE-LOOP-BACK hash:ip,port,ip family inet hashsize 1024 maxelem 65536
create svcgen-tmp hash:ip,port,ip family inet hashsize 1024 maxelem 65536
add svcgen-tmp 198.18.1.10,tcp:8080,198.18.1.10
add svcgen-tmp 198.18.1.11,tcp:8080,198.18.1.11
add svcgen-tmp 198.18.1.53,udp:5353,198.18.1.53
swap svcgen-tmp KUBE-LOOP-BACK
destroy svcgen-tmp
create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536
create svcgen-tmp hash:ip,port family inet hashsize 1024 maxelem 65536
add svcgen-tmp 198.19.0.10,tcp:80
add svcgen-tmp 198.19.0.132,tcp:80
add svcgen-tmp 198.19.0.52,udp:53
swap svcgen-tmp KUBE-CLUSTER-IP
destroy svcgen-tmp
create KUBE-EXTERNAL-IP hash:ip,port family inet hashsize 1024 maxelem 65536
create svcgen-tmp hash:ip,port family inet hashsize 1024 maxelem 65536
swap svcgen-tmp KUBE-EXTERNAL-IP
destroy svcgen-tmp
create KUBE-EXTERNAL-IP-LOCAL hash:ip,port family inet hashsize 1024 maxelem 65536
create svcgen-tmp hash:ip,port family inet hashsize 1024 maxelem 65536
swap svcgen-tmp KUBE-EXTERNAL-IP-LOCAL
destroy svcgen-tmp
create KUBE-LOAD-BALANCER hash:ip,port family inet hashsize 1024 maxelem 65536
create svcgen-tmp hash:ip,port family inet hashsize 1024 maxelem 65536
swap svcgen-tmp KUBE-LOAD-BALANCER
destroy svcgen-tmp
create KUBE-LOAD-BALANCER-FW hash:ip,port family inet hashsize 1024 maxelem 65536
create svcgen-tmp hash:ip,port family inet hashsize 1024 maxelem 65536
swap svcgen-tmp KUBE-LOAD-BALANCER-FW
destroy svcgen-tmp
create KUBE-LOAD-BALANCER-LOCAL hash:ip,port family inet hashsize 1024 maxelem 65536
create svcgen-tmp hash:ip,port family inet hashsize 1024 maxelem 65536
swap svcgen-tmp KUBE-LOAD-BALANCER-LOCAL
destroy svcgen-tmp
create KUBE-LOAD-BALANCER-SOURCE-IP hash:ip,port,ip family inet hashsize 1024 maxelem 65536
create svcgen-tmp hash:ip,port,ip family inet hashsize 1024 maxelem 65536
swap svcgen-tmp KUBE-LOAD-BALANCER-SOURCE-IP
destroy svcgen-tmp
create KUBE-LOAD-BALANCER-SOURCE-CIDR hash:ip,port,net family inet hashsize 1024 maxelem 65536
create svcgen-tmp hash:ip,port,net family inet hashsize 1024 maxelem 65536
swap svcgen-tmp KUBE-LOAD-BALANCER-SOURCE-CIDR
destroy svcgen-tmp
create KUBE-NODE-PORT-TCP bitmap:port range 0-65535
create svcgen-tmp bitmap:port range 0-65535
add svcgen-tmp 30080
swap svcgen-tmp KUBE-NODE-PORT-TCP
destroy svcgen-tmp
create KUBE-NODE-PORT-LOCAL-TCP bitmap:port range 0-65535
create svcgen-tmp bitmap:port range 0-65535
swap svcgen-tmp KUBE-NODE-PORT-LOCAL-TCP
destroy svcgen-tmp
create KUBE-NODE-PORT-UDP bitmap:port range 0-65535
create svcgen-tmp bitmap:port range 0-65535
swap svcgen-tmp KUBE-NODE-PORT-UDP
destroy svcgen-tmp
create KUBE-NODE-PORT-LOCAL-UDP bitmap:port range 0-65535
create svcgen-tmp bitmap:port range 0-65535
swap svcgen-tmp KUBE-NODE-PORT-LOCAL-UDP
destroy svcgen-tmp
create KUBE-NODE-PORT-SCTP-HASH hash:ip,port family inet hashsize 1024 maxelem 65536
create svcgen-tmp hash:ip,port family inet hashsize 1024 maxelem 65536
swap svcgen-tmp KUBE-NODE-PORT-SCTP-HASH
destroy svcgen-tmp
create KUBE-NODE-PORT-LOCAL-SCTP-HASH hash:ip,port family inet hashsize 1024 maxelem 65536
create svcgen-tmp hash:ip,port family inet hashsize 1024 maxelem 65536
swap svcgen-tmp KUBE-NODE-PORT-LOCAL-SCTP-HASH
destroy svcgen-tmp
create KUBE-HEALTH-CHECK-NODE-PORT bitmap:port range 0-65535
create svcgen-tmp bitmap:port range 0-65535
swap svcgen-tmp KUBE-HEALTH-CHECK-NODE-PORT
destroy svcgen-tmp
create KUBE-IPVS-IPS hash:ip family inet hashsize 1024 maxelem 65536
create svcgen-tmp hash:ip family inet hashsize 1024 maxelem 65536
add svcgen-tmp 198.19.0.10
add svcgen-tmp 198.19.0.132
add svcgen-tmp 198.19.0.52
swap svcgen-tmp KUBE-IPVS-IPS
destroy svcgen-tmp
SVCGEN_IPSET

# Virtual servers and real servers: only the differences go to ipvsadm -R.
svcgen_reconcile='function tell(cmd) {
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
}'
{
cat <<'SVCGEN_IPVS'
-A -t 198.18.0.1:30080 -s rr
-a -t 198.18.0.1:30080 -r 198.18.1.11:8080 -m -w 1
-a -t 198.18.0.1:30080 -r 198.18.2.12:8080 -m -w 1
-A -t 198.19.0.10:80 -s rr
-a -t 198.19.0.10:80 -r 198.18.1.10:8080 -m -w 1
-A -t 198.19.0.132:80 -s rr
-a -t 198.19.0.132:80 -r 198.18.1.11:8080 -m -w 1
-a -t 198.19.0.132:80 -r 198.18.2.12:8080 -m -w 1
-A -u 198.19.0.52:53 -s rr
-a -u 198.19.0.52:53 -r 198.18.1.53:5353 -m -w 1
SVCGEN_IPVS
echo %%
ipvsadm -Sn
echo %%
ipvsadm -Ln
} | awk -v family=4 -v exclude='' "$svcgen_reconcile" | ipvsadm -R

# The companion chains (kube-proxy's restore payload), then its jumps from the built-in chains.
iptables-restore -w --noflush <<'SVCGEN_IPTABLES'
*nat
:KUBE-SERVICES - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-LOAD-BALANCER - [0:0]
:KUBE-MARK-MASQ - [0:0]
-A KUBE-SERVICES -s 127.0.0.0/8 -j RETURN
-A KUBE-POSTROUTING -m comment --comment "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose" -m set --match-set KUBE-LOOP-BACK dst,dst,src -j MASQUERADE
-A KUBE-NODE-PORT -p tcp -m comment --comment "Kubernetes nodeport TCP port for masquerade purpose" -m set --match-set KUBE-NODE-PORT-TCP dst -j KUBE-MARK-MASQ
-A KUBE-SERVICES -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP dst,dst ! -s 198.18.0.0/16 -j KUBE-MARK-MASQ
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
-A KUBE-LOAD-BALANCER -j KUBE-MARK-MASQ
-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT
-A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
-A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
-A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
COMMIT
*filter
:KUBE-FORWARD - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-SOURCE-RANGES-FIREWALL - [0:0]
:KUBE-IPVS-FILTER - [0:0]
:KUBE-IPVS-OUT-FILTER - [0:0]
-A KUBE-SOURCE-RANGES-FIREWALL -j DROP
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00004000/0x00004000 -j ACCEPT
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A KUBE-NODE-PORT -m comment --comment "Kubernetes health check node port" -m set --match-set KUBE-HEALTH-CHECK-NODE-PORT dst -j ACCEPT
-A KUBE-IPVS-FILTER -m set --match-set KUBE-LOAD-BALANCER dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set KUBE-CLUSTER-IP dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set KUBE-EXTERNAL-IP dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set KUBE-EXTERNAL-IP-LOCAL dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set KUBE-HEALTH-CHECK-NODE-PORT dst -j RETURN
-A KUBE-IPVS-FILTER -m conntrack --ctstate NEW -m set --match-set KUBE-IPVS-IPS dst -j REJECT
COMMIT
SVCGEN_IPTABLES
iptables -w -t nat -C OUTPUT -m comment --comment 'kubernetes service portals' -j KUBE-SERVICES >/dev/null 2>&1 || iptables -w -t nat -I OUTPUT 1 -m comment --comment 'kubernetes service portals' -j KUBE-SERVICES
iptables -w -t nat -C PREROUTING -m comment --comment 'kubernetes service portals' -j KUBE-SERVICES >/dev/null 2>&1 || iptables -w -t nat -I PREROUTING 1 -m comment --comment 'kubernetes service portals' -j KUBE-SERVICES
iptables -w -t nat -C POSTROUTING -m comment --comment 'kubernetes postrouting rules' -j KUBE-POSTROUTING >/dev/null 2>&1 || iptables -w -t nat -I POSTROUTING 1 -m comment --comment 'kubernetes postrouting rules' -j KUBE-POSTROUTING
iptables -w -t filter -C FORWARD -m comment --comment 'kubernetes forwarding rules' -j KUBE-FORWARD >/dev/null 2>&1 || iptables -w -t filter -I FORWARD 1 -m comment --comment 'kubernetes forwarding rules' -j KUBE-FORWARD
iptables -w -t filter -C INPUT -m comment --comment 'kubernetes health check rules' -j KUBE-NODE-PORT >/dev/null 2>&1 || iptables -w -t filter -I INPUT 1 -m comment --comment 'kubernetes health check rules' -j KUBE-NODE-PORT
iptables -w -t filter -C INPUT -m comment --comment 'kube-proxy firewall rules' -j KUBE-PROXY-FIREWALL >/dev/null 2>&1 || iptables -w -t filter -I INPUT 1 -m comment --comment 'kube-proxy firewall rules' -j KUBE-PROXY-FIREWALL
iptables -w -t filter -C FORWARD -m comment --comment 'kube-proxy firewall rules' -j KUBE-PROXY-FIREWALL >/dev/null 2>&1 || iptables -w -t filter -I FORWARD 1 -m comment --comment 'kube-proxy firewall rules' -j KUBE-PROXY-FIREWALL
iptables -w -t filter -C INPUT -m comment --comment 'kubernetes ipvs access filter' -j KUBE-IPVS-FILTER >/dev/null 2>&1 || iptables -w -t filter -I INPUT 1 -m comment --comment 'kubernetes ipvs access filter' -j KUBE-IPVS-FILTER
iptables -w -t filter -C OUTPUT -m comment --comment 'kubernetes ipvs access filter' -j KUBE-IPVS-OUT-FILTER >/dev/null 2>&1 || iptables -w -t filter -I OUTPUT 1 -m comment --comment 'kubernetes ipvs access filter' -j KUBE-IPVS-OUT-FILTER
