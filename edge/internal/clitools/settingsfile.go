package clitools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// errNotObject is a settings file that is not a JSON object: it is left
// alone rather than overwritten.
var errNotObject = errors.New("settings file is not a JSON object")

// member is one key of a JSON object with its value exactly as read.
type member struct {
	key   string
	value json.RawMessage
}

// object is a JSON object that keeps its keys' order and its values' bytes,
// so that a file rewritten after a change differs only where it changed.
type object []member

// parseObject reads a JSON object; empty input is an empty object.
func parseObject(data []byte) (object, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return object{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, errNotObject
	}
	var o object
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, errNotObject
		}
		key, ok := tok.(string)
		if !ok {
			return nil, errNotObject
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, errNotObject
		}
		o = o.set(key, v)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, errNotObject
	}
	if _, err := dec.Token(); err == nil {
		return nil, errNotObject // trailing data
	}
	return o, nil
}

// get returns a key's value.
func (o object) get(key string) (json.RawMessage, bool) {
	for _, m := range o {
		if m.key == key {
			return m.value, true
		}
	}
	return nil, false
}

// set replaces a key's value in place, or appends the key.
func (o object) set(key string, v json.RawMessage) object {
	for i := range o {
		if o[i].key == key {
			o[i].value = v
			return o
		}
	}
	return append(o, member{key, v})
}

// remove drops a key; it reports whether the key was there.
func (o object) remove(key string) (object, bool) {
	for i := range o {
		if o[i].key == key {
			return append(o[:i:i], o[i+1:]...), true
		}
	}
	return o, false
}

// marshal writes the object with two-space indentation, as Claude Code
// writes its settings.
func (o object) marshal() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, err := marshalString(m.key)
		if err != nil {
			return nil, err
		}
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(m.value)
	}
	buf.WriteByte('}')
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// marshalString encodes s as a JSON string without HTML escaping.
func marshalString(s string) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// settingsFile is a settings.json on disk.
type settingsFile struct {
	path string
}

// read returns the file's object; a missing file is an empty object.
func (f settingsFile) read() (object, bool, error) {
	data, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return object{}, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	o, err := parseObject(data)
	return o, true, err
}

// env returns the object's "env" object (empty when absent).
func env(o object) (object, error) {
	raw, ok := o.get("env")
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return object{}, nil
	}
	e, err := parseObject(raw)
	if err != nil {
		return nil, fmt.Errorf(`"env" in the settings file is not a JSON object`)
	}
	return e, nil
}

// envString returns a string value of the env object ("" when absent or not
// a string).
func envString(e object, key string) string {
	raw, ok := e.get(key)
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// write replaces the file atomically (see writeFile).
func (f settingsFile) write(o object) error {
	data, err := o.marshal()
	if err != nil {
		return err
	}
	return writeFile(f.path, data)
}

// writeFile replaces a file atomically: a private temporary file in the
// same directory, synced, then renamed over the old one. The file is 0600:
// it holds an API key.
func writeFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	name := tmp.Name()
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(name)
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(name, path); err != nil {
		return err
	}
	done = true
	return nil
}
