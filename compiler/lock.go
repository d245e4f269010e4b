package compiler

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/svcgen/svcgen/model"
	"go.yaml.in/yaml/v3"
)

// Lock records the ClusterIPs and NodePorts of every Service, so that allocation stays
// stable from one run to the next (`--lock FILE`, meant to be committed beside the
// manifests). Keys are "namespace/name"; node ports are keyed "portName/PROTOCOL".
type Lock struct {
	Services map[string]LockedService
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
}

type lockFileService struct {
	ClusterIPs          []string         `yaml:"clusterIPs,omitempty,flow"`
	NodePorts           map[string]int32 `yaml:"nodePorts,omitempty"`
	HealthCheckNodePort int32            `yaml:"healthCheckNodePort,omitempty"`
}

const lockHeader = "# svcgen lock: the ClusterIPs and NodePorts svcgen allocated.\n# Commit it beside the manifests; `svcgen compile --lock` reads and rewrites it.\n"

// ParseLock reads a lock file. name is used in error messages.
func ParseLock(name string, data []byte) (*Lock, error) {
	var f lockFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %s", name, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if f.Kind != "" && f.Kind != "Lock" {
		return nil, fmt.Errorf("%s: kind: %q is not a svcgen Lock", name, f.Kind)
	}
	l := &Lock{Services: map[string]LockedService{}}
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
	return l, nil
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
