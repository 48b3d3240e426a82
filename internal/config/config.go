package config

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
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
	case errors.Is(e.Err, ErrUnknownKey) && e.Key == "":
		return fmt.Sprintf("%s: a value with no key (=%s) sets nothing: give its key or remove it", e.Source, e.Value)
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
	lines, err := parseLines(b)
	if err != nil {
		return Report{Source: path}, fmt.Errorf("config: read %s: %w", path, err)
	}
	// A pair with no key ("=value") is read by Properties.load as the key
	// "" and set on nothing by properties2Object, which sets fields by
	// name: RocketMQ starts with it, so raftmq does too, and names the
	// line in the warning.
	kv := make(map[string]string, len(lines))
	var noKey []NoKeyLine
	for _, l := range lines {
		if l.key == "" {
			noKey = append(noKey, NoKeyLine{Line: l.line, Value: l.value})
			continue
		}
		kv[l.key] = l.value
	}
	r, err := apply(kv, path, dst, true)
	r.NoKey = noKey
	return r, err
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
			if n > math.MaxInt64/int64(time.Millisecond) || n < math.MinInt64/int64(time.Millisecond) {
				return fmt.Errorf("%d ms is beyond what a duration holds", n)
			}
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
