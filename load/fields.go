package load

//go:generate sh -c "go run ./internal/gentable -o apitable.go $(go env GOMODCACHE)/k8s.io/kubernetes@v1.3[4-7].*/api/openapi-spec/swagger.json"

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/svcgen/svcgen/load/internal/tree"
)

// Unknown fields. svcgen reads few of the fields of the objects it reads; a typo in
// one it reads (selecter, targetPrt) would pass in silence, the field unread. So
// every mapping svcgen reads fields of is held to the fields the Kubernetes API has
// for it (apiFields, generated from the OpenAPI of every release svcgen supports;
// ownFields for the kinds that are not API objects): a field the API does not have
// is a warning, with the name it likely meant, and an error with Loader.Strict. A
// field the API has and svcgen does not read (status.conditions, managedFields) is
// fine, and so is anything inside it; so are the keys of labels, annotations and
// selectors, which are the user's. The minik8s dialect has fields of its own: there,
// only a field near one the API has is reported.

// schema is what the API has of a mapping that svcgen reads fields of: every
// field's name, with the schema of the field's value where svcgen reads fields of
// that too (nil elsewhere).
type schema struct {
	names []string  // sorted: the names a typo may have meant
	subs  []*schema // the schema of each name's value, or nil
	// items: the field's value is a list of such mappings.
	items bool
	// slots find a name fast: an open-addressing table of index+1 into names (0:
	// empty), its size a power of two. A map costs three times as much, and the
	// loader looks up every field of every object it reads.
	slots []uint8
}

// field finds a field's name: its index in names, -1 when the API has no such field.
func (s *schema) field(key string) int {
	mask := len(s.slots) - 1
	for h := slot(key) & mask; ; h = (h + 1) & mask {
		i := int(s.slots[h]) - 1
		if i < 0 || s.names[i] == key {
			return i
		}
	}
}

// slot hashes a field name: its length and three of its bytes tell the fields of
// one mapping apart nearly always.
func slot(key string) int {
	if key == "" {
		return 0
	}
	return len(key)*37 + int(key[0])*11 + int(key[len(key)/2])*5 + int(key[len(key)-1])
}

// ownFields are the fields of the kinds that are not objects of the Kubernetes API,
// as apiFields has them: kube-proxy's configuration (kubeproxy.config.k8s.io/v1alpha1
// of releases 1.34 to 1.37) and svcgen's NodeEnvironment.
var ownFields = map[string][]string{
	"KubeProxyConfiguration": {"apiVersion", "bindAddress", "bindAddressHardFail", "clientConnection", "clusterCIDR",
		"configSyncPeriod", "conntrack", "detectLocal", "detectLocalMode", "enableProfiling", "featureGates",
		"healthzBindAddress", "hostnameOverride", "iptables", "ipvs", "kind", "logging", "metricsBindAddress", "mode",
		"nftables", "nodePortAddresses", "oomScoreAdj", "portRange", "showHiddenMetricsForVersion", "windowsRunAsService",
		"winkernel"},
	"KubeProxyConfiguration.iptables":    {"localhostNodePorts", "masqueradeAll", "masqueradeBit", "minSyncPeriod", "syncPeriod"},
	"KubeProxyConfiguration.nftables":    {"masqueradeAll", "masqueradeBit", "minSyncPeriod", "syncPeriod"},
	"KubeProxyConfiguration.ipvs":        {"excludeCIDRs", "minSyncPeriod", "scheduler", "strictARP", "syncPeriod", "tcpFinTimeout", "tcpTimeout", "udpTimeout"},
	"KubeProxyConfiguration.detectLocal": {"bridgeInterface", "interfaceNamePrefix"},
	"NodeEnvironment":                    {"apiVersion", "conntrack", "interfaces", "ipFamily", "iptables", "kind", "metadata"},
	"NodeEnvironment.metadata":           apiFields["Service.metadata"],
	"NodeEnvironment.iptables":           {"nfacct", "randomFully"},
	"NodeEnvironment.conntrack":          {"tcpBeLiberal"},
	"NodeEnvironment.interfaces[]":       {"addresses", "name"},
}

// schemaOf builds the schema of a kind from the tables.
func schemaOf(kind string) *schema {
	paths := map[string][]string{} // path in the kind: field names
	for _, table := range []map[string][]string{apiFields, ownFields} {
		for key, names := range table {
			if path, ok := strings.CutPrefix(key, kind); ok && (path == "" || path[0] == '.') {
				paths[strings.TrimPrefix(path, ".")] = names
			}
		}
	}
	return buildSchema(paths, "", false)
}

// buildSchema builds the schema at path from paths ("spec", "spec.ports[]", ...).
func buildSchema(paths map[string][]string, path string, items bool) *schema {
	s := &schema{names: slices.Sorted(slices.Values(paths[path])), items: items}
	s.subs = make([]*schema, len(s.names))
	for i, name := range s.names {
		sub := name
		if path != "" {
			sub = path + "." + name
		}
		switch {
		case paths[sub] != nil:
			s.subs[i] = buildSchema(paths, sub, false)
		case paths[sub+"[]"] != nil:
			s.subs[i] = buildSchema(paths, sub+"[]", true)
		}
	}
	size := 1
	for size < 4*len(s.names) {
		size *= 2
	}
	s.slots = make([]uint8, size)
	for i, name := range s.names {
		h := slot(name) & (size - 1)
		for s.slots[h] != 0 {
			h = (h + 1) & (size - 1)
		}
		s.slots[h] = uint8(i + 1)
	}
	return s
}

// checkFields reports the fields of n, at path, that s does not have, and checks
// the values that s describes in turn.
func (w *walker) checkFields(n *tree.Node, s *schema, path tree.Path) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		key := n.Content[i].Value
		f := s.field(key)
		if f < 0 {
			switch meant := nearest(key, s.names); {
			case meant != "":
				w.typo(path.Key(key), "unknown field, passed over (did you mean %s?)", meant)
			case w.dialect != MiniK8s: // whose manifests have fields of their own
				w.typo(path.Key(key), "unknown field, passed over")
			}
			continue
		}
		switch sub, v := s.subs[f], &n.Content[i+1]; {
		case sub == nil:
		case sub.items && v.Kind == tree.Sequence:
			p := path.Key(key)
			for j := range v.Content {
				if v.Content[j].Kind == tree.Mapping {
					w.checkFields(&v.Content[j], sub, p.Index(j))
				}
			}
		case !sub.items && v.Kind == tree.Mapping:
			w.checkFields(v, sub, path.Key(key))
		}
	}
}

// typo reports what looks like a typo: a warning, or with Loader.Strict an error.
func (w *walker) typo(field tree.Path, format string, args ...any) {
	if w.strict {
		w.errorf(field, format, args...)
	} else {
		w.warnf(field, format, args...)
	}
}

// nearest is the name among names that s likely meant, "" when none is near: the
// nearest by optimal string alignment distance, ignoring case (a letter missing,
// added, changed or two swapped is one), when it is at most 1 for a name of up to 5
// characters and 2 for a longer one; the first in names of the nearest ones.
func nearest(s string, names []string) string {
	most := 1
	if utf8.RuneCountInString(s) > 5 {
		most = 2
	}
	best, bestDist := "", most+1
	lower := strings.ToLower(s)
	for _, name := range names {
		if d := distance(lower, strings.ToLower(name)); d < bestDist {
			best, bestDist = name, d
		}
	}
	return best
}

// distance is the optimal string alignment distance of a and b, by characters.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// d[i][j]: the distance of ra[:i] and rb[:j], three rows at a time.
	prev2, prev, cur := make([]int, len(rb)+1), make([]int, len(rb)+1), make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
