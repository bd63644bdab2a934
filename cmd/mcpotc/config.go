package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"
)

// Duration is a time.Duration written as "60s" in config files.
type Duration time.Duration

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf(`want a duration such as "60s"`)
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		return fmt.Errorf("%q is not a positive duration such as \"60s\"", s)
	}
	*d = Duration(v)
	return nil
}

// configError names the file, the key and the reason.
type configError struct {
	file, key, reason string
}

func (e *configError) Error() string {
	if e.key == "" {
		return fmt.Sprintf("%s: %s", e.file, e.reason)
	}
	return fmt.Sprintf("%s: %s: %s", e.file, e.key, e.reason)
}

// loadConfig reads a JSON config file strictly into dst: an unknown key or
// a value of the wrong type is an error naming the file, the key and the
// reason.
func loadConfig(path string, dst any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return decodeStrict(path, "", data, reflect.ValueOf(dst).Elem())
}

// decodeStrict decodes data into v, walking structs, slices and maps so that
// every unknown key is reported with its path.
func decodeStrict(file, path string, data []byte, v reflect.Value) error {
	fail := func(reason string) error { return &configError{file, path, reason} }
	data = bytes.TrimSpace(data)
	if u, ok := v.Addr().Interface().(json.Unmarshaler); ok {
		if err := u.UnmarshalJSON(data); err != nil {
			return fail(err.Error())
		}
		return nil
	}
	switch v.Kind() {
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
			return fail("want an object")
		}
		fields := map[string]reflect.Value{}
		var names []string
		for i := 0; i < v.NumField(); i++ {
			tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
			if tag != "" && tag != "-" {
				fields[tag] = v.Field(i)
				names = append(names, tag)
			}
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			f, ok := fields[k]
			if !ok {
				return &configError{file, join(path, k), "unknown key (known: " + strings.Join(names, ", ") + ")"}
			}
			if err := decodeStrict(file, join(path, k), obj[k], f); err != nil {
				return err
			}
		}
		return nil
	case reflect.Slice:
		var items []json.RawMessage
		if err := json.Unmarshal(data, &items); err != nil {
			return fail("want a list")
		}
		s := reflect.MakeSlice(v.Type(), len(items), len(items))
		for i, item := range items {
			if err := decodeStrict(file, fmt.Sprintf("%s[%d]", path, i), item, s.Index(i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	case reflect.Map:
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
			return fail("want an object")
		}
		m := reflect.MakeMapWithSize(v.Type(), len(obj))
		for k, item := range obj {
			e := reflect.New(v.Type().Elem()).Elem()
			if err := decodeStrict(file, join(path, k), item, e); err != nil {
				return err
			}
			m.SetMapIndex(reflect.ValueOf(k), e)
		}
		v.Set(m)
		return nil
	}
	if err := json.Unmarshal(data, v.Addr().Interface()); err != nil {
		return fail("want " + kindName(v.Kind()))
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func kindName(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64, reflect.Float64:
		return "a number"
	}
	return "a " + k.String()
}

// envName checks that a config value names an environment variable.
func envName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// requireEnv reads the environment variable a config key names.
func requireEnv(getenv func(string) string, file, key, name string) (string, error) {
	if !envName(name) {
		// The value is not repeated: it may be a secret written in by mistake.
		return "", &configError{file, key, "must name an environment variable (letters, digits, _): secrets are never written in the file, only the variable that holds them"}
	}
	v := getenv(name)
	if v == "" {
		return "", &configError{file, key, fmt.Sprintf("environment variable %s is not set", name)}
	}
	return v, nil
}

// oneOf checks an enumerated value.
func oneOf(file, key, value string, allowed ...string) error {
	if slices.Contains(allowed, value) {
		return nil
	}
	return &configError{file, key, fmt.Sprintf("%q is not one of %s", value, strings.Join(allowed, ", "))}
}
