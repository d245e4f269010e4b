package ruleview

import "bytes"

// UnifiedEager is Unified as it was before keys were made on demand, the reference
// the fast paths are held to: every line keyed, every line of a section the other view
// also has looked up by key.
func UnifiedEager(oldName string, old *View, newName string, new *View) []byte {
	d := unified(oldName, eagerText(old, new), newName, eagerText(new, nil))
	if len(d) == 0 {
		return nil
	}
	return Annotate(d, labelOf(old, new))
}

func eagerText(v, other *View) []byte {
	var b bytes.Buffer
	table := ""
	for _, s := range v.Sections {
		if s.Table != table {
			table = s.Table
			b.WriteString("*" + table + "\n")
		}
		b.WriteString(s.Header + "\n")
		var alt map[string]string
		if other != nil {
			if o := other.index()[[2]string{s.Table, s.Name}]; o != nil {
				alt = map[string]string{}
				for i := range o.Lines {
					alt[other.key(&o.Lines[i])] = o.Lines[i].Text
				}
			}
		}
		for i := range s.Lines {
			text := s.Lines[i].Text
			if t, ok := alt[v.key(&s.Lines[i])]; ok {
				text = t
			}
			b.WriteString(text + "\n")
		}
	}
	return b.Bytes()
}

// AuditEager is Audit as it was before keys were made on demand: every line keyed,
// entries compared by key.
func AuditEager(want, have *View) []Drift {
	for _, v := range []*View{want, have} {
		for _, s := range v.Sections {
			for i := range s.Lines {
				v.key(&s.Lines[i])
			}
		}
	}
	return audit(want, have, func(a, b entry) bool { return a.id() == b.id() })
}
