package load

import (
	"net/netip"

	"github.com/svcgen/svcgen/load/internal/tree"
	"github.com/svcgen/svcgen/model"
)

func (l *Loader) endpointSlice(w *walker, n *tree.Node) {
	es := &model.EndpointSlice{}
	var labels map[string]string
	es.Namespace, es.Name, labels = w.metadata(n, true, model.DNS1123Subdomain)
	es.Origin = w.origin
	es.ServiceName = labels[model.LabelServiceName]
	_, es.Headless = labels[model.LabelHeadless]
	if es.ServiceName == "" {
		w.warnf(tree.At("metadata.labels"), "no %s label: the slice belongs to no Service and is passed over", model.LabelServiceName)
		return
	}
	es.AddressType = w.str(n, "addressType")
	switch es.AddressType {
	case "IPv4", "IPv6", "FQDN":
	case "":
		w.errorf(tree.At("addressType"), "missing (want IPv4, IPv6 or FQDN)")
	default:
		w.errorf(tree.At("addressType"), "unknown address type %q (want IPv4, IPv6 or FQDN)", es.AddressType)
	}
	w.items(n, tree.Path{}, "ports", func(pn *tree.Node, path tree.Path) {
		es.Ports = append(es.Ports, w.endpointPort(pn, path))
	})
	if eps := tree.Get(n, "endpoints"); eps != nil && eps.Kind == tree.Sequence {
		es.Endpoints = make([]model.Endpoint, 0, len(eps.Content))
	}
	w.items(n, tree.Path{}, "endpoints", func(en *tree.Node, path tree.Path) {
		if ep, ok := w.endpoint(en, path, es.AddressType); ok {
			es.Endpoints = append(es.Endpoints, ep)
		}
	})
	l.Cluster.Slices = append(l.Cluster.Slices, es)
}

// endpointPort reads a slice or Endpoints port. An absent name is "", as the API
// server defaults it (SetDefaults_EndpointPort): a hand-written slice with one unnamed
// port serves the Service's unnamed port once applied, so it does here too.
func (w *walker) endpointPort(pn *tree.Node, path tree.Path) model.EndpointPort {
	var p model.EndpointPort
	if has(pn, "name") {
		p.Name = w.strAt(pn, path, "name")
		if p.Name != "" {
			w.name(p.Name, path.Key("name"), model.IANASvcName)
		}
	}
	p.Protocol = w.protocol(pn, path, "protocol")
	p.Port = w.port(pn, path, "port")
	return p
}

func (w *walker) endpoint(en *tree.Node, path tree.Path, addressType string) (model.Endpoint, bool) {
	var ep model.Endpoint
	if list := tree.Get(en, "addresses"); list != nil && list.Kind == tree.Sequence && addressType != "FQDN" {
		ep.Addresses = make([]netip.Addr, 0, len(list.Content))
	}
	w.seq(en, path, "addresses", func(an *tree.Node, ap tree.Path) {
		a, ok := w.strItem(an, ap)
		if !ok || addressType == "FQDN" {
			return
		}
		addr, ok := w.addr(a, ap)
		if !ok {
			return
		}
		if string(model.FamilyOf(addr)) != addressType {
			w.errorf(ap, "%s is not an %s address (the slice's addressType)", addr, addressType)
			return
		}
		ep.Addresses = append(ep.Addresses, addr)
	})
	if cond := w.mapping(en, path, "conditions"); cond != nil {
		cp := path.Key("conditions")
		ep.Ready = w.boolPtr(cond, cp, "ready")
		ep.Serving = w.boolPtr(cond, cp, "serving")
		ep.Terminating = w.boolPtr(cond, cp, "terminating")
	}
	ep.NodeName = w.strAt(en, path, "nodeName")
	ep.Zone = w.strAt(en, path, "zone")
	if hints := w.mapping(en, path, "hints"); hints != nil {
		hp := path.Key("hints")
		var h model.EndpointHints
		w.items(hints, hp, "forZones", func(n *tree.Node, p tree.Path) {
			h.Zones = append(h.Zones, w.strAt(n, p, "name"))
		})
		w.items(hints, hp, "forNodes", func(n *tree.Node, p tree.Path) {
			h.Nodes = append(h.Nodes, w.strAt(n, p, "name"))
		})
		if h.Zones != nil || h.Nodes != nil {
			ep.Hints = &h
		}
	}
	return ep, true
}

func (l *Loader) endpoints(w *walker, n *tree.Node) {
	e := &model.Endpoints{}
	e.Namespace, e.Name, _ = w.metadata(n, true, model.DNS1035Label)
	e.Origin = w.origin
	w.items(n, tree.Path{}, "subsets", func(sn *tree.Node, path tree.Path) {
		var sub model.EndpointsSubset
		sub.Addresses = w.endpointAddresses(sn, path, "addresses")
		sub.NotReadyAddresses = w.endpointAddresses(sn, path, "notReadyAddresses")
		w.items(sn, path, "ports", func(pn *tree.Node, pp tree.Path) {
			sub.Ports = append(sub.Ports, w.endpointPort(pn, pp))
		})
		e.Subsets = append(e.Subsets, sub)
	})
	l.Cluster.Endpoints = append(l.Cluster.Endpoints, e)
}

func (w *walker) endpointAddresses(sn *tree.Node, path tree.Path, key string) []model.EndpointAddress {
	var out []model.EndpointAddress
	w.items(sn, path, key, func(an *tree.Node, p tree.Path) {
		if a, ok := w.addrAt(an, p, "ip"); ok {
			out = append(out, model.EndpointAddress{IP: a, NodeName: w.strAt(an, p, "nodeName")})
		}
	})
	return out
}
