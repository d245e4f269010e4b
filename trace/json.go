package trace

import (
	"encoding/json"
	"io"
)

// The JSON form of a result (svcgen trace -o json), a stable schema for scripts:
//
//	{"mode": "iptables",
//	 "packet": {"proto": "tcp", "src": "10.0.0.2", "dst": "172.30.0.44:80", "inIface": "cbr0"},
//	 "source": {"locality": "local-pod", "name": "ns/client"},
//	 "outcomes": [{"verdict": "DNAT", "endpoint": "10.180.0.4:80", "probability": "1/2",
//	               "masquerade": false, "affinity": false,
//	               "path": [{"table": "nat", "chain": "PREROUTING", "rule": "-A PREROUTING ...",
//	                         "probability": "1"}, ...]}]}
//
// Probabilities are exact fractions as strings ("1/3"). verdict is DNAT, REJECT, DROP,
// ACCEPT, or "" when no rule decided.
type jsonResult struct {
	Mode     string        `json:"mode,omitempty"`
	Packet   jsonPacket    `json:"packet"`
	Source   *jsonSource   `json:"source,omitempty"`
	Outcomes []jsonOutcome `json:"outcomes"`
}

type jsonPacket struct {
	Proto   string `json:"proto"`
	Src     string `json:"src"`
	Dst     string `json:"dst"`
	InIface string `json:"inIface,omitempty"`
}

type jsonSource struct {
	Locality string `json:"locality"`
	Name     string `json:"name,omitempty"`
}

type jsonOutcome struct {
	Verdict     string     `json:"verdict"`
	Endpoint    string     `json:"endpoint,omitempty"`
	Probability string     `json:"probability"`
	Masquerade  bool       `json:"masquerade"`
	Affinity    bool       `json:"affinity"`
	Path        []jsonStep `json:"path"`
}

type jsonStep struct {
	Table       string `json:"table"`
	Chain       string `json:"chain"`
	Rule        string `json:"rule"`
	Service     string `json:"service,omitempty"`
	Probability string `json:"probability"`
}

// WriteJSON prints a result as one indented JSON object.
func WriteJSON(w io.Writer, r *Result) error {
	out := jsonResult{
		Mode:     r.Mode,
		Packet:   jsonPacket{Proto: r.Packet.Proto, Src: r.Packet.Src.String(), InIface: r.Packet.InIface},
		Outcomes: []jsonOutcome{},
	}
	out.Packet.Dst = r.Packet.dst()
	if r.Source.Locality != Unknown {
		out.Source = &jsonSource{Locality: string(r.Source.Locality), Name: r.Source.Name}
	}
	for _, o := range r.Outcomes {
		jo := jsonOutcome{Verdict: string(o.Verdict), Endpoint: o.Endpoint, Probability: o.Probability.RatString(),
			Masquerade: o.Masquerade, Affinity: o.Affinity, Path: []jsonStep{}}
		for _, s := range o.Path {
			p := "1"
			if s.P != nil {
				p = s.P.RatString()
			}
			jo.Path = append(jo.Path, jsonStep{Table: s.Table, Chain: s.Chain, Rule: s.Rule, Service: s.Service, Probability: p})
		}
		out.Outcomes = append(out.Outcomes, jo)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}
