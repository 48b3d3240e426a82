package wire

import (
	"bytes"
	"errors"
	"maps"
	"strings"
	"testing"
	"unsafe"
)

// canonicalByMap is what CanonicalProperties must equal: the map parse and
// the sorted encode, without the CRC property.
func canonicalByMap(s string) string {
	props := ParseProperties(s)
	delete(props, PropertyCRC32)
	return EncodeProperties(props)
}

var propertyCases = []string{
	"",
	"UNIQ_KEY\x017F0000010C9418B4AAC2A1C4F3E80001\x02",
	"UNIQ_KEY\x01u\x02WAIT\x01true\x02TAGS\x01TagA\x02KEYS\x01k1 k2\x02",
	"KEYS\x01k\x02TAGS\x01t\x02UNIQ_KEY\x01u\x02",
	"KEYS\x01k\x02TAGS\x01t\x02UNIQ_KEY\x01u",  // no trailing separator
	"A\x011\x02A\x012\x02",                     // duplicate: the last wins
	"B\x011\x02A\x01x\x02B\x012\x02A\x01y\x02", // unsorted duplicates
	"A\x01\x02\x01v\x02",                       // empty value, empty name
	"noSeparator\x02A\x011\x02\x02\x02",        // malformed and empty pairs
	"__CRC32#\x010000000001\x02A\x011\x02",     // a client's CRC property is dropped
	"A\x011\x02__CRC32#\x011\x02",              // also when sorted
	"A\x01a\x01b\x02",                          // \x01 in the value
	"\x02",                                     // one empty pair
	"DELAY\x013\x02",
	strings.Repeat("k\x01v\x02", 3) + "j\x01w\x02", // more duplicates than pairs
}

// TestCanonicalProperties: the map-free render equals the map's, and an
// input already in canonical form comes back as the same string (no copy).
func TestCanonicalProperties(t *testing.T) {
	var many strings.Builder
	for i := 40; i > 0; i-- { // more pairs than the stack array holds
		many.WriteString(string(rune('A'+i%26)) + string(rune('a'+i%7)) + "\x01v\x02")
	}
	cases := append(append([]string{}, propertyCases...), many.String())
	for _, s := range cases {
		got, want := CanonicalProperties(s), canonicalByMap(s)
		if got != want {
			t.Errorf("CanonicalProperties(%q) = %q, want %q", s, got, want)
		}
	}
	for _, s := range []string{"UNIQ_KEY\x01u\x02", "A\x011\x02B\x01\x02C\x01x\x01y\x02"} {
		if got := CanonicalProperties(s); unsafe.StringData(got) != unsafe.StringData(s) {
			t.Errorf("CanonicalProperties(%q) copied a canonical input", s)
		}
	}
}

// TestAppendMessageEncodedProperties: a message carrying EncodedProperties
// is stored byte for byte like the same message carrying the map, decodes
// to the same properties, and answers Property/Tags/Keys/UniqKey alike.
func TestAppendMessageEncodedProperties(t *testing.T) {
	for _, s := range propertyCases {
		byMap := sampleMessage()
		byMap.Properties = ParseProperties(s)
		want, err := AppendMessage(nil, byMap)
		if err != nil {
			t.Fatal(err)
		}
		enc := sampleMessage()
		enc.Properties, enc.EncodedProperties = nil, CanonicalProperties(s)
		got, err := AppendMessage([]byte("prefix"), enc)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[6:], want) {
			t.Fatalf("%q: stored bytes differ\n got %q\nwant %q", s, got[6:], want)
		}
		if n, _ := EncodedSize(enc); n != len(want) || int(enc.StoreSize) != n || enc.BodyCRC != byMap.BodyCRC || enc.SysFlag != byMap.SysFlag {
			t.Fatalf("%q: EncodedSize %d, StoreSize %d, want %d", s, n, enc.StoreSize, len(want))
		}
		dec, _, err := DecodeMessage(got[6:], false)
		if err != nil {
			t.Fatal(err)
		}
		wantProps := ParseProperties(s)
		delete(wantProps, PropertyCRC32)
		if !maps.Equal(dec.Properties, wantProps) {
			t.Fatalf("%q: decoded %v, want %v", s, dec.Properties, wantProps)
		}
		for _, name := range []string{PropertyTags, PropertyKeys, PropertyUniqKey, "A", "B", "", "DELAY", "missing"} {
			if enc.Property(name) != byMap.Property(name) {
				t.Fatalf("%q: Property(%q) = %q, map gives %q", s, name, enc.Property(name), byMap.Property(name))
			}
		}
		if enc.Tags() != byMap.Tags() || enc.UniqKey() != byMap.UniqKey() || strings.Join(enc.Keys(), " ") != strings.Join(byMap.Keys(), " ") {
			t.Fatalf("%q: Tags/Keys/UniqKey differ", s)
		}
	}
}

// TestEncodedPropertiesTooLong: the properties limit holds for the encoded
// form as for the map (CRC property included).
func TestEncodedPropertiesTooLong(t *testing.T) {
	m := sampleMessage()
	m.Properties = nil
	m.EncodedProperties = "A\x01" + strings.Repeat("v", MaxPropertiesLen-CRCPropLen-3) + "\x02"
	if _, err := AppendMessage(nil, m); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	m.EncodedProperties = "A\x01" + strings.Repeat("v", MaxPropertiesLen-CRCPropLen-2) + "\x02"
	if _, err := AppendMessage(nil, m); !errors.Is(err, ErrMessageIllegal) {
		t.Fatalf("one byte over the limit: %v", err)
	}
	if _, err := EncodedSize(m); !errors.Is(err, ErrMessageIllegal) {
		t.Fatalf("EncodedSize one byte over the limit: %v", err)
	}
}

// FuzzCanonicalProperties: for any string the map-free render equals the
// map's, and storing either form gives the same bytes.
func FuzzCanonicalProperties(f *testing.F) {
	for _, s := range propertyCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, want := CanonicalProperties(s), canonicalByMap(s)
		if got != want {
			t.Fatalf("CanonicalProperties(%q) = %q, want %q", s, got, want)
		}
		if len(want)+CRCPropLen > MaxPropertiesLen {
			return
		}
		byMap := sampleMessage()
		byMap.Properties = ParseProperties(s)
		enc := sampleMessage()
		enc.Properties, enc.EncodedProperties = nil, got
		a, errA := AppendMessage(nil, byMap)
		b, errB := AppendMessage(nil, enc)
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Fatalf("%q: stored forms differ (%v, %v)", s, errA, errB)
		}
	})
}

func BenchmarkCanonicalProperties(b *testing.B) {
	for _, s := range []string{propertyCases[1], propertyCases[2]} {
		b.Run("map", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = StoredProperties(ParseProperties(s))
			}
		})
		b.Run("direct", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = CanonicalProperties(s)
			}
		})
	}
}
