package remoting

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// Custom headers are plain structs whose fields carry `ext:"name"` tags;
// options after a comma: "required" (DecodeHeader fails when the key is
// absent) and "omitempty" (EncodeHeader skips zero values). Fields without
// a tag are ignored. Supported kinds: string, bool, int8..int64,
// uint8..uint64, float32, float64.
//
// Zero values are written by default because RocketMQ peers parse many
// fields unconditionally (a missing queueId or queueOffset breaks them).

type headerField struct {
	index     []int
	name      string
	required  bool
	omitempty bool
	kind      reflect.Kind
}

// headerFieldCache maps reflect.Type → []headerField so the tags are
// parsed once per header type.
var headerFieldCache sync.Map

func headerFields(t reflect.Type) []headerField {
	if v, ok := headerFieldCache.Load(t); ok {
		return v.([]headerField)
	}
	var fields []headerField
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag, ok := sf.Tag.Lookup("ext")
		if !ok || tag == "-" || !sf.IsExported() {
			continue
		}
		parts := strings.Split(tag, ",")
		f := headerField{index: sf.Index, name: parts[0], kind: sf.Type.Kind()}
		if f.name == "" {
			f.name = sf.Name
		}
		for _, opt := range parts[1:] {
			switch opt {
			case "required":
				f.required = true
			case "omitempty":
				f.omitempty = true
			}
		}
		fields = append(fields, f)
	}
	headerFieldCache.Store(t, fields)
	return fields
}

func structValue(v any, op string) (reflect.Value, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return reflect.Value{}, fmt.Errorf("remoting: %s: nil header pointer", op)
		}
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return reflect.Value{}, fmt.Errorf("remoting: %s: header must be a struct or pointer to struct, got %T", op, v)
	}
	return rv, nil
}

// DecodeHeader fills the struct pointed to by dst from ExtFields using the
// `ext` tags. A missing required field or an unparsable value yields a
// *HeaderError naming the field (errors.Is(err, ErrInvalidHeader)).
func (c *RemotingCommand) DecodeHeader(dst any) error {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("remoting: DecodeHeader: dst must be a non-nil pointer to struct, got %T", dst)
	}
	rv = rv.Elem()
	for _, f := range headerFields(rv.Type()) {
		val, ok := c.ExtFields[f.name]
		if !ok {
			if f.required {
				return &HeaderError{Field: f.name, Reason: "required field missing"}
			}
			continue
		}
		if err := setField(rv.FieldByIndex(f.index), f.kind, val); err != nil {
			return &HeaderError{Field: f.name, Value: val, Reason: err.Error()}
		}
	}
	return nil
}

func setField(fv reflect.Value, kind reflect.Kind, val string) error {
	switch kind {
	case reflect.String:
		fv.SetString(val)
	case reflect.Bool:
		// Java's Boolean.parseBoolean: "true" in any case is true, anything
		// else false; we are stricter only about garbage.
		b, err := strconv.ParseBool(strings.ToLower(val))
		if err != nil {
			return fmt.Errorf("not a bool")
		}
		fv.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(strings.TrimSpace(val), 10, fv.Type().Bits())
		if err != nil {
			return fmt.Errorf("not an int%d", fv.Type().Bits())
		}
		fv.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(strings.TrimSpace(val), 10, fv.Type().Bits())
		if err != nil {
			return fmt.Errorf("not a uint%d", fv.Type().Bits())
		}
		fv.SetUint(n)
	case reflect.Float32, reflect.Float64:
		n, err := strconv.ParseFloat(strings.TrimSpace(val), fv.Type().Bits())
		if err != nil {
			return fmt.Errorf("not a float")
		}
		fv.SetFloat(n)
	default:
		return fmt.Errorf("unsupported field kind %s", kind)
	}
	return nil
}

// EncodeHeader writes the `ext`-tagged fields of src (a struct or pointer
// to struct) into ExtFields, creating the map if needed. Fields tagged
// omitempty are skipped when zero; unsupported kinds are skipped.
func (c *RemotingCommand) EncodeHeader(src any) {
	rv, err := structValue(src, "EncodeHeader")
	if err != nil {
		return
	}
	if c.ExtFields == nil {
		c.ExtFields = make(map[string]string)
	}
	for _, f := range headerFields(rv.Type()) {
		fv := rv.FieldByIndex(f.index)
		if f.omitempty && fv.IsZero() {
			continue
		}
		var s string
		switch f.kind {
		case reflect.String:
			s = fv.String()
		case reflect.Bool:
			s = strconv.FormatBool(fv.Bool())
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			s = strconv.FormatInt(fv.Int(), 10)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			s = strconv.FormatUint(fv.Uint(), 10)
		case reflect.Float32, reflect.Float64:
			s = strconv.FormatFloat(fv.Float(), 'f', -1, fv.Type().Bits())
		default:
			continue
		}
		c.ExtFields[f.name] = s
	}
}
