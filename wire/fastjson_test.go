package wire

import "testing"

func TestQuoteLegacyKeys(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{0:"a",1:"b"}`, `{"0":"a","1":"b"}`},
		{`{"0":"a"}`, `{"0":"a"}`},
		{`{ 0 :"a", -1:"b"}`, `{ "0" :"a", "-1":"b"}`},
		{`[1,2,{3:4}]`, `[1,2,{"3":4}]`},
		{`{"s":"{0:\"x\",1:2}","n":[5,{6:[7]}]}`, `{"s":"{0:\"x\",1:2}","n":[5,{"6":[7]}]}`},
		{`{"a":{10:"x"},"b":12}`, `{"a":{"10":"x"},"b":12}`},
		{`{"esc":"a\\","k":{0:"v"}}`, `{"esc":"a\\","k":{"0":"v"}}`},
	}
	for _, tt := range tests {
		if got := string(QuoteLegacyKeys([]byte(tt.in))); got != tt.want {
			t.Errorf("QuoteLegacyKeys(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
