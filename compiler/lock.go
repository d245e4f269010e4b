package compiler

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/svcgen/svcgen/model"
	"go.yaml.in/yaml/v3"
)

// Lock records the ClusterIPs and NodePorts of every Service, and the addresses of
// the Pods svcgen made from workloads, so that allocation stays stable from one run
// to the next (`--lock FILE`, meant to be committed beside the manifests). Keys are
// "namespace/name"; node ports are keyed "portName/PROTOCOL".
type Lock struct {
	// Name is the file the lock was read from, for errors.
	Name     string
	Services map[string]LockedService
	Pods     map[string]LockedPod
}

// LockedPod is the lock entry of a Pod made from a workload: the workload that made
// it ("Deployment shop/web", see model.Workload.Key) and its addresses. An entry
// whose workload is in the input and no longer makes the Pod is dropped; one whose
// workload is not in the input is kept, its addresses reserved.
type LockedPod struct {
	Owner  string
	PodIPs []netip.Addr
}

// LockedService is the lock entry of one Service.
type LockedService struct {
	ClusterIPs          []netip.Addr
	NodePorts           map[string]int32
	HealthCheckNodePort int32
}

func nodePortKey(p model.ServicePort) string { return p.Name + "/" + string(p.Protocol) }

type lockFile struct {
	APIVersion string                     `yaml:"apiVersion"`
	Kind       string                     `yaml:"kind"`
	Services   map[string]lockFileService `yaml:"services"`
	Pods       map[string]lockFilePod     `yaml:"pods,omitempty"`
}

type lockFilePod struct {
	Owner  string   `yaml:"owner"`
	PodIPs []string `yaml:"podIPs,flow"`
}

type lockFileService struct {
	ClusterIPs          []string         `yaml:"clusterIPs,omitempty,flow"`
	NodePorts           map[string]int32 `yaml:"nodePorts,omitempty"`
	HealthCheckNodePort int32            `yaml:"healthCheckNodePort,omitempty"`
}

const lockHeader = "# svcgen lock: the ClusterIPs and NodePorts svcgen allocated, and the addresses of the Pods it made.\n# Commit it beside the manifests; `svcgen compile --lock` reads and rewrites it.\n# Entries of Services not in a run's input are kept, their addresses reserved: delete\n# an entry to free them.\n"

// ParseLock reads a lock file. name is used in error messages.
func ParseLock(name string, data []byte) (*Lock, error) {
	var f lockFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %s", name, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if f.Kind != "" && f.Kind != "Lock" {
		return nil, fmt.Errorf("%s: kind: %q is not a svcgen Lock", name, f.Kind)
	}
	l := &Lock{Name: name, Services: map[string]LockedService{}}
	for key, s := range f.Services {
		ls := LockedService{NodePorts: s.NodePorts, HealthCheckNodePort: s.HealthCheckNodePort}
		for i, ip := range s.ClusterIPs {
			a, err := model.ParseAddr(ip)
			if err != nil {
				return nil, fmt.Errorf("%s: services[%q].clusterIPs[%d]: %v", name, key, i, err)
			}
			ls.ClusterIPs = append(ls.ClusterIPs, a)
		}
		for k, p := range s.NodePorts {
			if p < 1 || p > 65535 {
				return nil, fmt.Errorf("%s: services[%q].nodePorts[%q]: %d is out of range", name, key, k, p)
			}
		}
		l.Services[key] = ls
	}
	l.Pods = map[string]LockedPod{}
	for key, p := range f.Pods {
		lp := LockedPod{Owner: p.Owner}
		for i, ip := range p.PodIPs {
			a, err := model.ParseAddr(ip)
			if err != nil {
				return nil, fmt.Errorf("%s: pods[%q].podIPs[%d]: %v", name, key, i, err)
			}
			lp.PodIPs = append(lp.PodIPs, a)
		}
		l.Pods[key] = lp
	}
	return l, nil
}

// check refuses a lock that would change allocations silently: an address held by two
// entries, two addresses of one family in an entry, an address outside every service
// CIDR. Every problem is reported, each naming its entry.
func (l *Lock) check(cidrs []netip.Prefix) error {
	keys := slices.Sorted(maps.Keys(l.Services))
	owner := map[netip.Addr]string{}
	var errs []error
	bad := func(key string, i int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: services[%q].clusterIPs[%d]: %s (edit or delete the entry)", l.Name, key, i, fmt.Sprintf(format, args...)))
	}
	for _, key := range keys {
		seen := map[model.IPFamily]bool{}
		for i, a := range l.Services[key].ClusterIPs {
			switch f := model.FamilyOf(a); {
			case owner[a] != "":
				bad(key, i, "%s is also locked for Service %s", a, owner[a])
			case seen[f]:
				bad(key, i, "a second %s address, %s", f, a)
			case !slices.ContainsFunc(cidrs, func(p netip.Prefix) bool { return p.Contains(a) }):
				bad(key, i, "%s is outside every service CIDR (%s)", a, joinPrefixes(cidrs))
			default:
				owner[a] = key
				seen[f] = true
			}
		}
	}
	return errors.Join(errs...)
}

func joinPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// Marshal writes the lock in a stable form (keys sorted).
func (l *Lock) Marshal() []byte {
	f := lockFile{APIVersion: "svcgen/v1alpha1", Kind: "Lock", Services: map[string]lockFileService{}}
	for key, s := range l.Services {
		fs := lockFileService{NodePorts: s.NodePorts, HealthCheckNodePort: s.HealthCheckNodePort}
		for _, a := range s.ClusterIPs {
			fs.ClusterIPs = append(fs.ClusterIPs, a.String())
		}
		f.Services[key] = fs
	}
	for key, p := range l.Pods {
		if f.Pods == nil {
			f.Pods = map[string]lockFilePod{}
		}
		fp := lockFilePod{Owner: p.Owner}
		for _, a := range p.PodIPs {
			fp.PodIPs = append(fp.PodIPs, a.String())
		}
		f.Pods[key] = fp
	}
	out, err := yaml.Marshal(&f)
	if err != nil {
		panic(err) // plain strings and numbers always marshal
	}
	return append([]byte(lockHeader), out...)
}

// PortRange is a node-port range such as 30000-32767.
type PortRange struct{ Min, Max int32 }

// DefaultNodePortRange is the API server's default.
var DefaultNodePortRange = PortRange{30000, 32767}

// ParsePortRange reads "30000-32767".
func ParsePortRange(s string) (PortRange, error) {
	lo, hi, ok := strings.Cut(s, "-")
	a, err1 := strconv.Atoi(strings.TrimSpace(lo))
	b, err2 := strconv.Atoi(strings.TrimSpace(hi))
	if !ok || err1 != nil || err2 != nil || a < 1 || b > 65535 || a > b {
		return PortRange{}, fmt.Errorf("%q is not a port range such as 30000-32767", s)
	}
	return PortRange{int32(a), int32(b)}, nil
}

func (r PortRange) String() string { return fmt.Sprintf("%d-%d", r.Min, r.Max) }

func (r PortRange) contains(p int32) bool { return p >= r.Min && p <= r.Max }
