package broker

import "github.com/raftmq/raftmq/wire"

// registerCompressAbove is the plain (JSON) REGISTER_BROKER body size
// above which a broker compresses it even without compressedRegister. The
// name servers' frame limit is 16 MiB; a table of ~40k topics with long
// names passes it in JSON (≈ 450 bytes per topic) but compresses about
// tenfold in RocketMQ's zlib layout (wire.EncodeRegisterBrokerBody), which
// RocketMQ 4.9+ name servers and raftmq's decode. Below it the JSON body
// stays, so small brokers cost the name servers no inflate.
const registerCompressAbove = 4 << 20

// encodeRegistration encodes a registration body: compressed when always
// (compressedRegister) or when the JSON form is above
// registerCompressAbove. It reports which form it returns (the request
// header's compressed flag).
func encodeRegistration(body *wire.RegisterBrokerBody, always bool) ([]byte, bool, error) {
	if !always {
		raw, err := wire.EncodeRegisterBrokerBody(body, false)
		if err != nil || len(raw) <= registerCompressAbove {
			return raw, false, err
		}
	}
	raw, err := wire.EncodeRegisterBrokerBody(body, true)
	return raw, err == nil, err
}
