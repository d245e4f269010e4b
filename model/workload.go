package model

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Workload is a controller of Pods: a Deployment, ReplicaSet, StatefulSet, DaemonSet,
// ReplicationController, Job or CronJob, reduced to what making its Pods needs. The
// resolver makes the Pods the controller would (package compiler, workloads.go).
type Workload struct {
	Origin
	Kind            string // as manifests spell it: "Deployment"
	Namespace, Name string
	// Owner is the controller owner reference (metadata.ownerReferences with
	// controller: true); zero when there is none.
	Owner OwnerRef
	// Replicas is spec.replicas (1 when absent); a Job's spec.parallelism, capped by
	// spec.completions; unused for DaemonSets and CronJobs.
	Replicas int32
	Selector LabelSelector
	// ServiceName is a StatefulSet's spec.serviceName, OrdinalsStart its
	// spec.ordinals.start.
	ServiceName   string
	OrdinalsStart int32
	Template      PodTemplate
}

// Key is "Kind namespace/name", how messages name a workload.
func (w *Workload) Key() string { return w.Kind + " " + w.Namespace + "/" + w.Name }

// OwnerRef names an object's controller: the kind and name of its controller owner
// reference (in the object's namespace).
type OwnerRef struct{ Kind, Name string }

// IsZero reports an object without a controller.
func (o OwnerRef) IsZero() bool { return o == OwnerRef{} }

// PodTemplate is the part of a pod template (spec.template) that shapes endpoints
// and placement.
type PodTemplate struct {
	Labels       map[string]string
	NodeName     string
	NodeSelector map[string]string
	// NodeAffinity is requiredDuringSchedulingIgnoredDuringExecution's
	// nodeSelectorTerms, of which a Node must match one; nil when there is none.
	NodeAffinity []NodeSelectorTerm
	Tolerations  []Toleration
	HostNetwork  bool
	Hostname     string
	Subdomain    string
	Ports        []ContainerPort
}

// Toleration is an entry of spec.tolerations.
type Toleration struct {
	Key, Operator, Value, Effect string
}

// Tolerates reports whether t tolerates a taint, as the scheduler's
// ToleratesTaint does: an empty key with Exists tolerates every taint.
func (t Toleration) Tolerates(taint Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key != "" && t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case "Exists":
		return true
	case "", "Equal":
		return t.Value == taint.Value
	}
	return false
}

// Taint is an entry of a Node's spec.taints.
type Taint struct {
	Key, Value, Effect string
}

// NodeSelectorTerm is one of a required node affinity's terms: every requirement of
// it must hold. MatchFields may only name metadata.name.
type NodeSelectorTerm struct {
	MatchExpressions []Requirement
	MatchFields      []Requirement
}

// Matches reports whether a Node matches the term.
func (t NodeSelectorTerm) Matches(n *Node) bool {
	for _, r := range t.MatchExpressions {
		if !r.Matches(n.Labels) {
			return false
		}
	}
	for _, r := range t.MatchFields {
		if !r.Matches(map[string]string{"metadata.name": n.Name}) {
			return false
		}
	}
	return true
}

// LabelSelector is a metav1.LabelSelector: every matchLabels entry and every
// matchExpressions requirement must hold. The zero value matches everything.
type LabelSelector struct {
	MatchLabels      map[string]string
	MatchExpressions []Requirement
}

// IsEmpty reports a selector with no requirement at all.
func (s LabelSelector) IsEmpty() bool {
	return len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0
}

// Matches reports whether labels satisfy the selector.
func (s LabelSelector) Matches(labels map[string]string) bool {
	for k, v := range s.MatchLabels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	for _, r := range s.MatchExpressions {
		if !r.Matches(labels) {
			return false
		}
	}
	return true
}

// Requirement is one matchExpressions entry: a key, an operator (In, NotIn, Exists,
// DoesNotExist; node selectors also Gt and Lt) and values.
type Requirement struct {
	Key, Operator string
	Values        []string
}

// Matches reports whether labels satisfy the requirement, as
// k8s.io/apimachinery/pkg/labels does.
func (r Requirement) Matches(labels map[string]string) bool {
	v, ok := labels[r.Key]
	switch r.Operator {
	case "In":
		return ok && slices.Contains(r.Values, v)
	case "NotIn":
		return !ok || !slices.Contains(r.Values, v)
	case "Exists":
		return ok
	case "DoesNotExist":
		return !ok
	case "Gt", "Lt":
		if !ok || len(r.Values) != 1 {
			return false
		}
		have, err1 := strconv.ParseInt(v, 10, 64)
		want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == "Gt" {
			return have > want
		}
		return have < want
	}
	return false
}

// Check validates a requirement as the API server does (ValidateLabelSelector,
// ValidateNodeSelectorRequirement): a known operator, values where it takes them
// and none where it does not. nodes allows Gt and Lt.
func (r Requirement) Check(nodes bool) error {
	if err := CheckLabelKey(r.Key); err != nil {
		return fmt.Errorf("key: %w", err)
	}
	switch r.Operator {
	case "In", "NotIn":
		if len(r.Values) == 0 {
			return fmt.Errorf("operator %s needs values", r.Operator)
		}
	case "Exists", "DoesNotExist":
		if len(r.Values) > 0 {
			return fmt.Errorf("operator %s takes no values", r.Operator)
		}
	case "Gt", "Lt":
		if !nodes {
			return fmt.Errorf("unknown operator %q (want In, NotIn, Exists or DoesNotExist)", r.Operator)
		}
		if len(r.Values) != 1 {
			return fmt.Errorf("operator %s needs exactly one value", r.Operator)
		}
		if _, err := strconv.ParseInt(r.Values[0], 10, 64); err != nil {
			return fmt.Errorf("operator %s needs a whole number, got %q", r.Operator, r.Values[0])
		}
		return nil
	case "":
		return errors.New("operator: missing")
	default:
		if nodes {
			return fmt.Errorf("unknown operator %q (want In, NotIn, Exists, DoesNotExist, Gt or Lt)", r.Operator)
		}
		return fmt.Errorf("unknown operator %q (want In, NotIn, Exists or DoesNotExist)", r.Operator)
	}
	for _, v := range r.Values {
		if err := CheckLabelValue(v); err != nil {
			return err
		}
	}
	return nil
}

// CheckLabelKey validates a label key: an optional DNS subdomain prefix and "/",
// then a name of at most 63 letters, digits, '-', '_' and '.', starting and ending
// with a letter or digit.
func CheckLabelKey(k string) error {
	prefix, name, found := strings.Cut(k, "/")
	if !found {
		prefix, name = "", k
	}
	if found {
		if _, err := CheckName(prefix, DNS1123Subdomain); err != nil || kubeNameRule(prefix, DNS1123Subdomain) != "" {
			return fmt.Errorf("%q is not a valid label key: the prefix must be a DNS subdomain", k)
		}
	}
	if name == "" || len(name) > 63 || !qualifiedChars(name) {
		return fmt.Errorf("%q is not a valid label key: the name must be 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", k)
	}
	return nil
}

// CheckLabelValue validates a label value: empty, or at most 63 letters, digits,
// '-', '_' and '.', starting and ending with a letter or digit.
func CheckLabelValue(v string) error {
	if v != "" && (len(v) > 63 || !qualifiedChars(v)) {
		return fmt.Errorf("%q is not a valid label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", v)
	}
	return nil
}

func qualifiedChars(s string) bool {
	if !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(isAlnum(c) || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// Workload kinds, as manifests spell them.
const (
	KindDeployment            = "Deployment"
	KindReplicaSet            = "ReplicaSet"
	KindStatefulSet           = "StatefulSet"
	KindDaemonSet             = "DaemonSet"
	KindReplicationController = "ReplicationController"
	KindJob                   = "Job"
	KindCronJob               = "CronJob"
)

// Labels the controllers set on the Pods they make.
const (
	LabelPodTemplateHash    = "pod-template-hash"
	LabelStatefulSetPodName = "statefulset.kubernetes.io/pod-name"
	LabelPodIndex           = "apps.kubernetes.io/pod-index"
	LabelJobName            = "batch.kubernetes.io/job-name"
	LabelHostname           = "kubernetes.io/hostname"
)

// FormatSelector writes a Service's selector as kubectl does: "app=web,tier=front".
func FormatSelector(sel map[string]string) string {
	parts := make([]string, 0, len(sel))
	for _, k := range slices.Sorted(maps.Keys(sel)) {
		parts = append(parts, k+"="+sel[k])
	}
	return strings.Join(parts, ",")
}
