package conntest

import (
	"bytes"
	"context"
	"io"
	"net/http"
)

// Post sends one POST of body to url, bounded by ctx, with the header
// fields of header (the field "Host" sets the request's Host instead), and
// returns the answer's status, header and whole body.
func Post(ctx context.Context, url string, header map[string]string, body []byte) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, data, err
}
