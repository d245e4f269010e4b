package load

import (
	"github.com/svcgen/svcgen/load/internal/tree"
	"github.com/svcgen/svcgen/model"
)

// Workloads: the controllers of Pods. The loader reads what making their Pods
// needs (replicas, selector, the pod template's labels, ports and placement) and
// checks what the API server would refuse: negative replicas, a selector that is not
// a label selector, a template whose labels its own selector does not match. The
// Pods themselves are the resolver's to make (compiler/workloads.go).

// workload decodes a Deployment, ReplicaSet, StatefulSet, DaemonSet,
// ReplicationController or Job; a CronJob's Job is at spec.jobTemplate.
func (l *Loader) workload(w *walker, n *tree.Node) {
	wl := &model.Workload{Kind: w.kind()}
	wl.Namespace, wl.Name, _ = w.metadata(n, true, model.DNS1123Subdomain)
	wl.Origin = w.origin
	wl.Owner = w.owner(n)
	spec := w.mapping(n, tree.Path{}, "spec")
	specPath := tree.At("spec")
	if wl.Kind == model.KindCronJob {
		jt := w.mapping(spec, specPath, "jobTemplate")
		spec, specPath = w.mapping(jt, specPath.Key("jobTemplate"), "spec"), specPath.Key("jobTemplate").Key("spec")
	}
	if spec == nil {
		w.errorf(specPath, "missing")
		return
	}
	wl.Replicas = w.replicas(wl.Kind, spec, specPath)
	if wl.Kind == model.KindStatefulSet {
		wl.ServiceName = w.strAt(spec, specPath, "serviceName")
		if ord := w.mapping(spec, specPath, "ordinals"); ord != nil {
			start, _ := w.integer(ord, specPath.Key("ordinals"), "start", 0, 1<<31-1)
			wl.OrdinalsStart = int32(start)
		}
	}
	tp := specPath.Key("template")
	template := w.mapping(spec, specPath, "template")
	if template == nil {
		w.errorf(tp, "missing")
		return
	}
	wl.Template = w.podTemplate(template, tp)
	wl.Selector = w.workloadSelector(wl, spec, specPath)
	l.Cluster.Workloads = append(l.Cluster.Workloads, wl)
}

// kind is the object's kind as its origin names it (the loader only reads kinds
// spelled plainly).
func (w *walker) kind() string { return w.origin.Kind }

// owner reads the controller owner reference of an object's metadata.
func (w *walker) owner(n *tree.Node) model.OwnerRef {
	var o model.OwnerRef
	meta := w.mapping(n, tree.Path{}, "metadata")
	w.items(meta, tree.At("metadata"), "ownerReferences", func(rn *tree.Node, path tree.Path) {
		if c, _ := w.boolean(rn, path, "controller"); c {
			o = model.OwnerRef{Kind: w.strAt(rn, path, "kind"), Name: w.strAt(rn, path, "name")}
		}
	})
	return o
}

// replicas reads how many Pods a workload runs at once: spec.replicas (default 1)
// of a Deployment, ReplicaSet, StatefulSet or ReplicationController; a Job's
// spec.parallelism (default 1) capped by spec.completions.
func (w *walker) replicas(kind string, spec *tree.Node, path tree.Path) int32 {
	count := func(key string) (int32, bool) {
		n := tree.Get(spec, key)
		if tree.IsNull(n) {
			return 1, false
		}
		if n.Kind == tree.Scalar && n.Tag == tree.Int && len(n.Value) > 0 && n.Value[0] == '-' {
			w.errorf(path.Key(key), "%s is negative: a count of Pods must be 0 or more", n.Value)
			return 0, true
		}
		v, ok := w.integer(spec, path, key, 0, 1<<31-1)
		if !ok {
			return 0, true
		}
		return int32(v), true
	}
	switch kind {
	case model.KindDaemonSet:
		return 0
	case model.KindJob, model.KindCronJob:
		p, _ := count("parallelism")
		if c, set := count("completions"); set && c < p {
			return c
		}
		return p
	}
	r, _ := count("replicas")
	return r
}

// workloadSelector reads spec.selector and checks that the template's labels match
// it, as the API server does. A ReplicationController's selector is a plain map that
// defaults to the template's labels; a Job's defaults to the template's labels too
// (the API server would add a controller-uid to both).
func (w *walker) workloadSelector(wl *model.Workload, spec *tree.Node, path tree.Path) model.LabelSelector {
	var sel model.LabelSelector
	sp := path.Key("selector")
	switch wl.Kind {
	case model.KindReplicationController:
		sel.MatchLabels = w.stringMap(spec, path, "selector")
		if sel.MatchLabels == nil {
			sel.MatchLabels = wl.Template.Labels
		}
	default:
		sel = w.labelSelector(spec, path, "selector")
		if !has(spec, "selector") {
			if wl.Kind == model.KindJob || wl.Kind == model.KindCronJob {
				return model.LabelSelector{MatchLabels: wl.Template.Labels}
			}
			w.errorf(sp, "missing: a %s needs a selector that matches its template's labels", wl.Kind)
			return sel
		}
	}
	if sel.IsEmpty() {
		w.errorf(sp, "empty: a %s's selector must select its template's labels", wl.Kind)
		return sel
	}
	for k, v := range sel.MatchLabels {
		if err := model.CheckLabelKey(k); err != nil {
			w.errorf(sp.Key("matchLabels").Key(k), "%v", err)
		} else if err := model.CheckLabelValue(v); err != nil {
			w.errorf(sp.Key("matchLabels").Key(k), "%v", err)
		}
	}
	if !sel.Matches(wl.Template.Labels) {
		w.errorf(path.Key("template").Key("metadata").Key("labels"), "the template's labels do not match spec.selector (the API server refuses such a %s)", wl.Kind)
	}
	return sel
}

// labelSelector reads a metav1.LabelSelector at key, checking each requirement.
func (w *walker) labelSelector(parent *tree.Node, path tree.Path, key string) model.LabelSelector {
	var sel model.LabelSelector
	n := w.mapping(parent, path, key)
	if n == nil {
		return sel
	}
	p := path.Key(key)
	sel.MatchLabels = w.stringMap(n, p, "matchLabels")
	sel.MatchExpressions = w.requirements(n, p, "matchExpressions", false)
	return sel
}

// requirements reads matchExpressions (or a node selector's matchFields); nodes
// allows the operators Gt and Lt.
func (w *walker) requirements(parent *tree.Node, path tree.Path, key string, nodes bool) []model.Requirement {
	var out []model.Requirement
	w.items(parent, path, key, func(rn *tree.Node, rp tree.Path) {
		r := model.Requirement{Key: w.strAt(rn, rp, "key"), Operator: w.strAt(rn, rp, "operator"), Values: w.strList(rn, rp, "values")}
		if err := r.Check(nodes); err != nil {
			w.errorf(rp, "not a valid selector requirement: %v", err)
			return
		}
		out = append(out, r)
	})
	return out
}

// podTemplate reads a pod template: its labels, and of its spec the container ports
// and what places its Pods.
func (w *walker) podTemplate(n *tree.Node, path tree.Path) model.PodTemplate {
	var t model.PodTemplate
	t.Labels = w.stringMap(w.mapping(n, path, "metadata"), path.Key("metadata"), "labels")
	sp := path.Key("spec")
	spec := w.mapping(n, path, "spec")
	if spec == nil {
		w.errorf(sp, "missing")
		return t
	}
	t.NodeName = w.strAt(spec, sp, "nodeName")
	t.NodeSelector = w.stringMap(spec, sp, "nodeSelector")
	t.HostNetwork, _ = w.boolean(spec, sp, "hostNetwork")
	t.Hostname = w.strAt(spec, sp, "hostname")
	t.Subdomain = w.strAt(spec, sp, "subdomain")
	t.Ports = w.containerPorts(spec, sp)
	w.items(spec, sp, "tolerations", func(tn *tree.Node, tp tree.Path) {
		t.Tolerations = append(t.Tolerations, model.Toleration{
			Key: w.strAt(tn, tp, "key"), Operator: w.strAt(tn, tp, "operator"),
			Value: w.strAt(tn, tp, "value"), Effect: w.strAt(tn, tp, "effect"),
		})
	})
	aff := w.mapping(w.mapping(w.mapping(spec, sp, "affinity"), sp.Key("affinity"), "nodeAffinity"), sp.Key("affinity").Key("nodeAffinity"), "requiredDuringSchedulingIgnoredDuringExecution")
	ap := sp.Key("affinity").Key("nodeAffinity").Key("requiredDuringSchedulingIgnoredDuringExecution")
	w.items(aff, ap, "nodeSelectorTerms", func(tn *tree.Node, tp tree.Path) {
		t.NodeAffinity = append(t.NodeAffinity, model.NodeSelectorTerm{
			MatchExpressions: w.requirements(tn, tp, "matchExpressions", true),
			MatchFields:      w.requirements(tn, tp, "matchFields", true),
		})
	})
	if aff != nil && t.NodeAffinity == nil {
		t.NodeAffinity = []model.NodeSelectorTerm{} // a Node must match one of no terms: none does
	}
	return t
}

// containerPorts reads the ports of every container of a pod spec.
func (w *walker) containerPorts(spec *tree.Node, path tree.Path) []model.ContainerPort {
	var out []model.ContainerPort
	w.items(spec, path, "containers", func(cn *tree.Node, cp tree.Path) {
		w.items(cn, cp, "ports", func(pn *tree.Node, pp tree.Path) {
			cport := model.ContainerPort{
				Name:          w.strAt(pn, pp, "name"),
				ContainerPort: w.port(pn, pp, "containerPort"),
				Protocol:      w.protocol(pn, pp, "protocol"),
			}
			if cport.Name != "" {
				w.name(cport.Name, pp.Key("name"), model.IANASvcName)
			}
			out = append(out, cport)
		})
	})
	return out
}
