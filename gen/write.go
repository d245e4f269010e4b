package gen

import (
	"bufio"
	"encoding/json"
	"strconv"
	"strings"
)

// obj is an object with its keys in order; list is a sequence. Values are string,
// int, bool, obj and list.
type (
	obj  []kv
	list []any
	kv   struct {
		key   string
		value any
	}
)

// writer prints objects in one syntax.
type writer interface {
	begin(comment string)
	object(o obj)
	end()
}

// yamlWriter prints each object as its own document, in block style as kubectl
// prints it: two-space indentation, list items at their key's indentation.
type yamlWriter struct {
	w *bufio.Writer
}

func (y *yamlWriter) begin(comment string) { y.w.WriteString("# " + comment + "\n") }

func (y *yamlWriter) end() {}

func (y *yamlWriter) object(o obj) {
	y.w.WriteString("---\n")
	y.mapping(o, 0, false)
}

// mapping prints o's keys at indent; the first key follows a "- " already written
// when inItem.
func (y *yamlWriter) mapping(o obj, indent int, inItem bool) {
	for i, e := range o {
		if i > 0 || !inItem {
			y.w.WriteString(strings.Repeat(" ", indent))
		}
		y.w.WriteString(e.key)
		y.w.WriteByte(':')
		y.value(e.value, indent)
	}
}

// value prints what follows "key:".
func (y *yamlWriter) value(v any, indent int) {
	switch v := v.(type) {
	case obj:
		y.w.WriteByte('\n')
		y.mapping(v, indent+2, false)
	case list:
		if len(v) == 0 {
			y.w.WriteString(" []\n")
			return
		}
		y.w.WriteByte('\n')
		for _, item := range v {
			y.w.WriteString(strings.Repeat(" ", indent) + "- ")
			if o, ok := item.(obj); ok {
				y.mapping(o, indent+2, true)
				continue
			}
			y.w.WriteString(scalarText(item, true) + "\n")
		}
	default:
		y.w.WriteString(" " + scalarText(v, true) + "\n")
	}
}

// scalarText prints a scalar; strings that YAML would read as another type are quoted.
func scalarText(v any, yaml bool) string {
	switch v := v.(type) {
	case int:
		return strconv.Itoa(v)
	case bool:
		return strconv.FormatBool(v)
	case string:
		if yaml && !needsQuotes(v) {
			return v
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	panic("gen: unknown value type")
}

// needsQuotes: the generator's strings are names, addresses and CIDRs; the ones that
// look like other types (True, 2024-01-01T00:00:00Z) get quotes, as kubectl does.
func needsQuotes(s string) bool {
	switch s {
	case "", "True", "False", "true", "false", "None":
		return true
	}
	return s[0] >= '0' && s[0] <= '9' && strings.Count(s, "-") > 1
}

// jsonWriter prints a kind: List with every object as an item.
type jsonWriter struct {
	w     *bufio.Writer
	items int
}

func (j *jsonWriter) begin(string) {
	j.w.WriteString("{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"items\": [")
}

func (j *jsonWriter) end() { j.w.WriteString("\n  ]\n}\n") }

func (j *jsonWriter) object(o obj) {
	if j.items > 0 {
		j.w.WriteByte(',')
	}
	j.items++
	j.w.WriteString("\n    ")
	j.value(o, 4)
}

// value prints v indented as kubectl does (four spaces a level).
func (j *jsonWriter) value(v any, indent int) {
	pad := "\n" + strings.Repeat(" ", indent+4)
	switch v := v.(type) {
	case obj:
		j.w.WriteByte('{')
		for i, e := range v {
			if i > 0 {
				j.w.WriteByte(',')
			}
			j.w.WriteString(pad + strconv.Quote(e.key) + ": ")
			j.value(e.value, indent+4)
		}
		j.w.WriteString("\n" + strings.Repeat(" ", indent) + "}")
	case list:
		j.w.WriteByte('[')
		for i, item := range v {
			if i > 0 {
				j.w.WriteByte(',')
			}
			j.w.WriteString(pad)
			j.value(item, indent+4)
		}
		j.w.WriteString("\n" + strings.Repeat(" ", indent) + "]")
	default:
		j.w.WriteString(scalarText(v, false))
	}
}
