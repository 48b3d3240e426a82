package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/magiconair/properties"
)

// ErrUnknownKey is wrapped by the error returned for a key that no field of
// the target struct declares. RocketMQ silently ignores such keys; we don't,
// because a misspelt key (flushDiskTyp=SYNC_FLUSH) would otherwise leave a
// durability setting at its default without anyone noticing.
var ErrUnknownKey = errors.New("unknown config key")

// ErrBadValue is wrapped by the error returned for a value that does not
// parse as the field's type.
var ErrBadValue = errors.New("malformed config value")

var durationType = reflect.TypeOf(time.Duration(0))

// KeyError names the file and key that were wrong and why.
type KeyError struct {
	Source string // file name, or a description such as "flags"
	Key    string
	Value  string
	Err    error // ErrUnknownKey, ErrBadValue or ErrIgnoredKey, possibly wrapping a cause
	// Suggest is the closest known key to an unknown one ("" when none is
	// close enough to be a likely misspelling).
	Suggest string
}

func (e *KeyError) Error() string {
	switch {
	case errors.Is(e.Err, ErrUnknownKey) && e.Suggest != "":
		return fmt.Sprintf("%s: unknown key %q: did you mean %q?", e.Source, e.Key, e.Suggest)
	case errors.Is(e.Err, ErrUnknownKey):
		return fmt.Sprintf("%s: unknown key %q (neither a raftmq key nor a RocketMQ key it knows; see docs/config.md)", e.Source, e.Key)
	case errors.Is(e.Err, ErrIgnoredKey):
		return fmt.Sprintf("%s: key %s=%s refused: %s", e.Source, e.Key, e.Value,
			strings.TrimPrefix(e.Err.Error(), ErrIgnoredKey.Error()+": "))
	}
	return fmt.Sprintf("%s: key %q: cannot use value %q: %v", e.Source, e.Key, e.Value, e.Err)
}

// Unwrap returns the sentinel (and through it any parse error).
func (e *KeyError) Unwrap() error { return e.Err }

// LoadFile reads the properties file at path and applies every key in it to
// dst, which must be a pointer to a struct. Fields whose keys the file does
// not mention keep their current values, so callers start from DefaultConfig().
//
// Keys that dst lists as ignored (see Ignorer) are skipped and dropped
// without a word; use Load to get them for the one warning.
func LoadFile(path string, dst any) error {
	_, err := Load(path, dst)
	return err
}

// Load is LoadFile that also returns the ignored keys the file set, for the
// caller to log as one warning (Report.Warning). Every bad key of the file
// is reported in the one error (errors.Join of *KeyError, sorted by key),
// not only the first.
func Load(path string, dst any) (Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Report{Source: path}, fmt.Errorf("config: read %s: %w", path, err)
	}
	kv, err := ParseProperties(b)
	if err != nil {
		return Report{Source: path}, fmt.Errorf("config: read %s: %w", path, err)
	}
	return apply(kv, path, dst, true)
}

// Apply sets dst's fields from a key→value map; source names where the map
// came from in error messages. Every bad key is reported (errors.Join of
// *KeyError in sorted key order); the good ones are applied all the same.
// Unlike a file, a map given at run time (UPDATE_BROKER_CONFIG) may not set
// an ignored key: that is an ErrIgnoredKey saying why, because accepting a
// setting that changes nothing would tell the operator it took effect.
func Apply(kv map[string]string, source string, dst any) error {
	_, err := apply(kv, source, dst, false)
	return err
}

func apply(kv map[string]string, source string, dst any, tolerate bool) (Report, error) {
	rep := Report{Source: source}
	fields, err := fieldsOf(dst)
	if err != nil {
		return rep, err
	}
	var ignored map[string]Ignored
	if ig, ok := dst.(Ignorer); ok {
		ignored = ig.IgnoredKeys()
	}
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		v := strings.TrimSpace(kv[k])
		f, ok := fields[k]
		if !ok {
			if ig, known := ignored[k]; known {
				switch {
				case ig.Refuse(v) != "":
					errs = append(errs, &KeyError{Source: source, Key: k, Value: v, Err: fmt.Errorf("%w: %s", ErrIgnoredKey, ig.Refuse(v))})
				case tolerate:
					rep.Ignored = append(rep.Ignored, IgnoredKey{Key: k, Value: v, Reason: ig.Reason})
				default:
					errs = append(errs, &KeyError{Source: source, Key: k, Value: v,
						Err: fmt.Errorf("%w: raftmq does not use it (%s)", ErrIgnoredKey, ig.Reason)})
				}
				continue
			}
			errs = append(errs, &KeyError{Source: source, Key: k, Value: v, Err: ErrUnknownKey,
				Suggest: suggest(k, fields, ignored)})
			continue
		}
		if err := set(f, v); err != nil {
			errs = append(errs, &KeyError{Source: source, Key: k, Value: v, Err: fmt.Errorf("%w: %v", ErrBadValue, err)})
		}
	}
	return rep, errors.Join(errs...)
}

// Keys lists every key dst declares, sorted.
func Keys(dst any) ([]string, error) {
	fields, err := fieldsOf(dst)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(fields))
	for k := range fields {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, nil
}

// Print writes the effective configuration with WriteProperties, so the
// output of `-p` can be saved as a file and a GET_BROKER_CONFIG or
// GET_NAMESRV_CONFIG answer reads back the same.
func Print(w io.Writer, src any) error {
	fields, err := fieldsOf(src)
	if err != nil {
		return err
	}
	kv := make(map[string]string, len(fields))
	for k, f := range fields {
		kv[k] = format(f)
	}
	return WriteProperties(w, kv)
}

// WriteProperties writes kv as sorted key=value lines that Java's
// Properties.load, and so ParseProperties, reads back exactly: RocketMQ's
// tools read config answers with it (MixAll.string2Properties). A value
// that needs no escape is written as is, as RocketMQ's properties2String
// writes every value, so '=' and ':' in values (name server lists) stay
// plain. Unlike properties2String, a backslash, a line break, a tab or
// form feed, and a leading space are escaped (Properties.store's escapes):
// written raw, load would drop the backslash or end the value at the
// line break. The text is ASCII: string2Properties loads the bytes as
// ISO-8859-1, so any other character is a \uXXXX escape (a surrogate pair
// outside the BMP), as Properties.store writes it.
func WriteProperties(w io.Writer, kv map[string]string) error {
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(escapeProperty(k, true))
		b.WriteByte('=')
		b.WriteString(escapeProperty(kv[k], false))
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// escapeProperty escapes s as Properties.store's saveConvert does, but
// leaves a value's separators and comment marks as they are (load needs
// them escaped only in keys).
func escapeProperty(s string, key bool) string {
	var b strings.Builder
	for i, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\f':
			b.WriteString(`\f`)
		case ' ':
			if key || i == 0 { // load skips the whitespace before a value
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		case '=', ':', '#', '!':
			if key {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		default:
			if r < 0x20 || r > 0x7e {
				for _, u := range utf16.Encode([]rune{r}) {
					fmt.Fprintf(&b, `\u%04X`, u)
				}
				continue
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}

// ParseProperties reads a Java properties text as RocketMQ's
// string2Properties does (Properties.load: escapes, continued lines, '#'
// and '!' comments, '=', ':' or whitespace after the key), as UTF-8 and
// without ${} expansion, which Java does not have. It reads conf files,
// config answers and UPDATE_BROKER_CONFIG / UPDATE_NAMESRV_CONFIG bodies.
func ParseProperties(b []byte) (map[string]string, error) {
	l := &properties.Loader{Encoding: properties.UTF8, DisableExpansion: true}
	p, err := l.LoadBytes(joinSurrogateEscapes(b))
	if err != nil {
		return nil, err
	}
	return p.Map(), nil
}

// joinSurrogateEscapes replaces each \uXXXX\uXXXX surrogate pair, how
// Properties.store writes a character outside the BMP, by the character's
// UTF-8: the loader decodes every escape alone and would make each half a
// replacement character. Other escapes, "\\" included, are kept as they are.
func joinSurrogateEscapes(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 == len(b) {
			out = append(out, b[i])
			continue
		}
		hi, okHi := unicodeEscape(b[i:])
		lo, okLo := unicodeEscape(b[min(i+6, len(b)):])
		if okHi && okLo && utf16.IsSurrogate(hi) && hi < 0xdc00 && lo >= 0xdc00 && lo <= 0xdfff {
			out = utf8.AppendRune(out, utf16.DecodeRune(hi, lo))
			i += 11
			continue
		}
		out = append(out, b[i], b[i+1]) // so `\\u0041` stays a backslash and "u0041"
		i++
	}
	return out
}

// unicodeEscape reads a \uXXXX escape at the start of b.
func unicodeEscape(b []byte) (rune, bool) {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[2:6]), 16, 16)
	return rune(n), err == nil
}

// fieldsOf walks the struct behind ptr and returns its tagged fields by key.
func fieldsOf(ptr any) (map[string]reflect.Value, error) {
	v := reflect.ValueOf(ptr)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("config: target must be a non-nil pointer to a struct, got %T", ptr)
	}
	out := make(map[string]reflect.Value)
	if err := collect(v.Elem(), out); err != nil {
		return nil, err
	}
	return out, nil
}

func collect(v reflect.Value, out map[string]reflect.Value) error {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		fv := v.Field(i)
		key, ok := sf.Tag.Lookup("prop")
		if !ok || key == "" {
			if sf.Type.Kind() == reflect.Struct && sf.Type != durationType {
				if err := collect(fv, out); err != nil {
					return err
				}
			}
			continue
		}
		if key == "-" {
			continue
		}
		if _, dup := out[key]; dup {
			return fmt.Errorf("config: key %q declared twice in %s", key, t)
		}
		out[key] = fv
	}
	return nil
}

func set(f reflect.Value, s string) error {
	if f.Type() == durationType {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			f.SetInt(int64(time.Duration(n) * time.Millisecond))
			return nil
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("want milliseconds or a duration like 500ms")
		}
		f.SetInt(int64(d))
		return nil
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("want true or false")
		}
		f.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, f.Type().Bits())
		if err != nil {
			return fmt.Errorf("want an integer that fits %s", f.Type())
		}
		f.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(s, 10, f.Type().Bits())
		if err != nil {
			return fmt.Errorf("want a non-negative integer that fits %s", f.Type())
		}
		f.SetUint(n)
	case reflect.Float32, reflect.Float64:
		n, err := strconv.ParseFloat(s, f.Type().Bits())
		if err != nil {
			return fmt.Errorf("want a number")
		}
		f.SetFloat(n)
	default:
		return fmt.Errorf("unsupported field type %s", f.Type())
	}
	return nil
}

func format(f reflect.Value) string {
	if f.Type() == durationType {
		return strconv.FormatInt(time.Duration(f.Int()).Milliseconds(), 10)
	}
	return fmt.Sprint(f.Interface())
}
