package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// object is one JSON object read strictly: valid UTF-8, no duplicate keys
// (encoding/json would silently keep the last), nothing after it. Values
// stay raw until an accessor reads them with the type it requires; keys
// nobody asks for are ignored (newer Kafka versions add some).
type object struct {
	path  string // the node, for errors
	where string // the key path inside it (`"partitions".`), for errors
	m     map[string]json.RawMessage
	keys  []string // in document order
}

// parseObject reads a node's data as a JSON object.
func parseObject(path string, data []byte) (object, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return object{}, malformed(path, "empty, want a JSON object")
	}
	if !utf8.Valid(data) {
		return object{}, malformed(path, "not UTF-8")
	}
	return readObject(path, "", data)
}

func readObject(path, where string, data []byte) (object, error) {
	o := object{path: path, where: where, m: map[string]json.RawMessage{}}
	bad := func(err error) (object, error) {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return object{}, malformed(path, "%s: %v", o.context(), err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return bad(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return object{}, malformed(path, "%s: want a JSON object, have %s", o.context(), show(data))
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return bad(err)
		}
		key, ok := tok.(string)
		if !ok { // cannot happen: the decoder checks object syntax
			return object{}, malformed(path, "%s: key %v is not a string", o.context(), tok)
		}
		if _, dup := o.m[key]; dup {
			return object{}, malformed(path, "%s: duplicate key %q", o.context(), key)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return bad(err)
		}
		o.m[key] = raw
		o.keys = append(o.keys, key)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return bad(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return object{}, malformed(path, "%s: data after the JSON object", o.context())
	}
	return o, nil
}

// context names the object in errors.
func (o object) context() string {
	if o.where == "" {
		return "JSON"
	}
	return o.where
}

// name is how errors call key.
func (o object) name(key string) string { return o.where + strconv.Quote(key) }

// show abbreviates a raw value for an error message: as it is when it is
// printable, quoted otherwise.
func show(raw []byte) string {
	const max = 40
	more := ""
	if len(raw) > max {
		raw, more = raw[:max], "..."
	}
	if !utf8.Valid(raw) || bytes.ContainsFunc(raw, func(r rune) bool { return !unicode.IsPrint(r) }) || len(raw) == 0 {
		return strconv.Quote(string(raw)) + more
	}
	return string(raw) + more
}

func (o object) has(key string) bool { _, ok := o.m[key]; return ok }

// isNull reports whether key is present with the value null.
func (o object) isNull(key string) bool { return string(o.m[key]) == "null" }

func (o object) missing(key string) error {
	return malformed(o.path, "missing key %s", o.name(key))
}

func (o object) wrongType(key, want string) error {
	return malformed(o.path, "%s: want %s, have %s", o.name(key), want, show(o.m[key]))
}

// int reads a required integer that fits in bits and lies in [lo, hi].
func (o object) int(key string, bits int, lo, hi int64) (int64, error) {
	raw, ok := o.m[key]
	if !ok {
		return 0, o.missing(key)
	}
	n, ok := asInt(raw, bits)
	if !ok {
		return 0, o.wrongType(key, fmt.Sprintf("an int%d", bits))
	}
	if n < lo || n > hi {
		return 0, malformed(o.path, "%s: %d out of range [%d, %d]", o.name(key), n, lo, hi)
	}
	return n, nil
}

// int32 reads a required int32 in [lo, hi].
func (o object) int32(key string, lo, hi int32) (int32, error) {
	n, err := o.int(key, 32, int64(lo), int64(hi))
	return int32(n), err
}

// str reads a required string (not null).
func (o object) str(key string) (string, error) {
	raw, ok := o.m[key]
	if !ok {
		return "", o.missing(key)
	}
	s, ok := asString(raw)
	if !ok {
		return "", o.wrongType(key, "a string")
	}
	return s, nil
}

// strOrNull reads an optional string that may be null: nil when absent or
// null.
func (o object) strOrNull(key string) (*string, error) {
	if !o.has(key) || o.isNull(key) {
		return nil, nil
	}
	s, err := o.str(key)
	if err != nil {
		return nil, o.wrongType(key, "a string or null")
	}
	return &s, nil
}

// obj reads a required nested object.
func (o object) obj(key string) (object, error) {
	raw, ok := o.m[key]
	if !ok {
		return object{}, o.missing(key)
	}
	if len(raw) == 0 || raw[0] != '{' {
		return object{}, o.wrongType(key, "an object")
	}
	return readObject(o.path, o.name(key)+".", raw)
}

// strings reads a required array of strings.
func (o object) strings(key string) ([]string, error) {
	var elems []json.RawMessage
	if err := o.array(key, &elems); err != nil {
		return nil, err
	}
	out := make([]string, len(elems))
	for i, e := range elems {
		s, ok := asString(e)
		if !ok {
			return nil, malformed(o.path, "%s[%d]: want a string, have %s", o.name(key), i, show(e))
		}
		out[i] = s
	}
	return out, nil
}

// ids reads a required array of distinct broker ids (int32 >= 0).
func (o object) ids(key string) ([]int32, error) {
	var elems []json.RawMessage
	if err := o.array(key, &elems); err != nil {
		return nil, err
	}
	out := make([]int32, 0, len(elems))
	for i, e := range elems {
		n, ok := asInt(e, 32)
		if !ok || n < 0 {
			return nil, malformed(o.path, "%s[%d]: want a broker id (an int32 >= 0), have %s", o.name(key), i, show(e))
		}
		if slices.Contains(out, int32(n)) {
			return nil, malformed(o.path, "%s: broker %d appears twice", o.name(key), n)
		}
		out = append(out, int32(n))
	}
	return out, nil
}

func (o object) array(key string, elems *[]json.RawMessage) error {
	raw, ok := o.m[key]
	if !ok {
		return o.missing(key)
	}
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, elems) != nil {
		return o.wrongType(key, "an array")
	}
	return nil
}

// asInt reads a JSON integer (no fraction, no exponent) that fits in bits.
func asInt(raw []byte, bits int) (int64, bool) {
	if len(raw) == 0 || raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return 0, false
	}
	n, err := strconv.ParseInt(string(raw), 10, bits)
	return n, err == nil
}

// asString reads a JSON string.
func asString(raw []byte) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// marshal encodes v without HTML escaping (Kafka's Jackson writes '<', '>'
// and '&' as they are) and without the encoder's newline.
func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only the package's own structs of strings, numbers and maps of
		// strings come here: they always encode.
		panic("layout: encoding " + fmt.Sprintf("%T", v) + ": " + err.Error())
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// quote encodes a string as JSON, as marshal does.
func quote(s string) []byte { return marshal(s) }
