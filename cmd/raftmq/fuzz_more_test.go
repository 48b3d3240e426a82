package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzParseMQAdminTime: a time flag written as mqadmin writes it
// (yyyy-MM-dd#HH:mm:ss:SSS, local time, UtilAll.YYYY_MM_DD_HH_MM_SS_SSS),
// or with its fields unpadded as Java's lenient parser also takes them,
// reads back to the same instant, milliseconds included; "now" and epoch
// milliseconds read as such; anything else is a usage error.
func FuzzParseMQAdminTime(f *testing.F) {
	f.Add(int64(1700000000123), "")
	f.Add(int64(1700000000000), "")
	f.Add(int64(0), "now")
	f.Add(int64(-1), "2024-01-02#03:04:05")
	f.Add(int64(1), "2024-01-02#03:04:05:1234")
	f.Add(int64(1), "x")
	f.Add(int64(1), "2024-1-5#3:4:5:6")
	f.Add(int64(1), "2024-13-32#24:60:60:1500")
	f.Fuzz(func(t *testing.T, ms int64, s string) {
		if ms >= 0 && ms < 253402300800000 { // years 1970..9999
			want := time.UnixMilli(ms)
			text := want.Format("2006-01-02#15:04:05") + fmt.Sprintf(":%03d", want.Nanosecond()/1e6)
			got, err := parseMQAdminTime("s", text)
			if err != nil || !got.Equal(want) {
				t.Fatalf("%q read as %v, %v; want %v", text, got, err, want)
			}
			unpadded := fmt.Sprintf("%d-%d-%d#%d:%d:%d:%d", want.Year(), want.Month(), want.Day(), want.Hour(), want.Minute(), want.Second(), want.Nanosecond()/1e6)
			if got, err := parseMQAdminTime("s", unpadded); err != nil || !got.Equal(want) {
				t.Fatalf("%q read as %v, %v; want %v", unpadded, got, err, want)
			}
			if got, err := parseMQAdminTime("s", strconv.FormatInt(ms, 10)); err != nil || !got.Equal(want) {
				t.Fatalf("%d ms read as %v, %v", ms, got, err)
			}
		}
		got, err := parseMQAdminTime("s", s)
		if err != nil {
			if !errors.Is(err, errAdminUsage) {
				t.Fatalf("error %v is not a usage error", err)
			}
			return
		}
		if s != "now" && got.IsZero() {
			t.Fatalf("%q read as the zero time", s)
		}
	})
}

// FuzzParseBytes: a size flag (bench restart) is a non-negative byte
// count or an error, never a wrapped or NaN-derived one.
func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"1GiB", "1.5MiB", "512KiB", "100", "-1", "NaN", "Inf", "1e300GiB", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseBytes(s)
		if err == nil && n < 0 {
			t.Fatalf("%q read as %d bytes", s, n)
		}
	})
}

// FuzzParseCounts: a count list (bench scale) is positive counts in order
// or an error.
func FuzzParseCounts(f *testing.F) {
	for _, s := range []string{"1,10,100", " 2 , ,3", "0", "-1", "x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		counts, err := parseCounts(s)
		if err != nil {
			return
		}
		var parts []string
		for _, c := range counts {
			if c < 1 {
				t.Fatalf("%q gives count %d", s, c)
			}
			parts = append(parts, strconv.Itoa(c))
		}
		back, err := parseCounts(strings.Join(parts, ","))
		if err != nil || fmt.Sprint(back) != fmt.Sprint(counts) {
			t.Fatalf("%q → %v → %v, %v", s, counts, back, err)
		}
	})
}
