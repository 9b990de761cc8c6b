//! Output in iproute2's two forms, through one interface, as iproute2's `print_*` helpers do.
//!
//! Every value is printed with a JSON key and a text template; in text mode the template is
//! written, in JSON mode the key and the value. The JSON writer reproduces iproute2's
//! `json_writer.c` byte for byte, including `-p` pretty printing (four-space indents, `[ {`,
//! `"flags": [ ]`), and a command's JSON output is one array followed by a newline.

use std::fmt::Write as _;

struct Json {
    pretty: bool,
    depth: usize,
    /// The separator to write before the next element ('\0' = none), as `json_writer.c` keeps it.
    sep: u8,
}

/// A printer for one command's output.
pub struct Printer {
    pub buf: Vec<u8>,
    json: Option<Json>,
}

impl Printer {
    /// A text printer, or a JSON one that has opened the command's top-level array.
    pub fn new(json: bool, pretty: bool) -> Printer {
        let mut p = Printer {
            buf: Vec::new(),
            json: json.then_some(Json {
                pretty,
                depth: 0,
                sep: 0,
            }),
        };
        if p.json.is_some() {
            p.begin(b'[');
            if pretty {
                p.buf.push(b' ');
            }
        }
        p
    }

    pub fn is_json(&self) -> bool {
        self.json.is_some()
    }

    /// Closes the top-level array (JSON) and returns the bytes.
    pub fn finish(mut self) -> Vec<u8> {
        if self.json.is_some() {
            self.end_array_raw();
            self.buf.push(b'\n');
        }
        self.buf
    }

    fn eor(&mut self) {
        let j = self.json.as_mut().expect("json");
        if j.sep != 0 {
            self.buf.push(j.sep);
        }
        j.sep = b',';
    }

    fn eol(&mut self) {
        let j = self.json.as_ref().expect("json");
        if !j.pretty {
            return;
        }
        let depth = j.depth;
        self.buf.push(b'\n');
        for _ in 0..depth {
            self.buf.extend_from_slice(b"    ");
        }
    }

    fn begin(&mut self, c: u8) {
        self.eor();
        self.buf.push(c);
        let j = self.json.as_mut().expect("json");
        j.depth += 1;
        j.sep = 0;
    }

    fn end(&mut self, c: u8) {
        let j = self.json.as_mut().expect("json");
        j.depth -= 1;
        if j.sep != 0 {
            self.eol();
        }
        self.buf.push(c);
        self.json.as_mut().expect("json").sep = b',';
    }

    fn name(&mut self, name: &str) {
        self.eor();
        self.eol();
        self.json.as_mut().expect("json").sep = 0;
        self.quoted(name);
        self.buf.push(b':');
        if self.json.as_ref().is_some_and(|j| j.pretty) {
            self.buf.push(b' ');
        }
    }

    fn quoted(&mut self, s: &str) {
        self.buf.push(b'"');
        for c in s.chars() {
            match c {
                '"' => self.buf.extend_from_slice(b"\\\""),
                '\\' => self.buf.extend_from_slice(b"\\\\"),
                '\n' => self.buf.extend_from_slice(b"\\n"),
                '\t' => self.buf.extend_from_slice(b"\\t"),
                '\r' => self.buf.extend_from_slice(b"\\r"),
                '\x08' => self.buf.extend_from_slice(b"\\b"),
                '\x0c' => self.buf.extend_from_slice(b"\\f"),
                '\'' => self.buf.extend_from_slice(b"\\'"),
                c => {
                    let mut b = [0u8; 4];
                    self.buf.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
                }
            }
        }
        self.buf.push(b'"');
    }

    fn end_array_raw(&mut self) {
        let j = self.json.as_mut().expect("json");
        if j.pretty && j.sep != 0 {
            self.buf.push(b' ');
        }
        self.json.as_mut().expect("json").sep = 0;
        self.end(b']');
    }

    fn key(&mut self, key: Option<&str>) {
        if let Some(k) = key {
            self.name(k);
        }
        // As `jsonw_*` value writers do: a separator before (none right after a name), ',' after.
        self.eor();
    }

    /// `open_json_object(key)`: JSON only.
    pub fn open_obj(&mut self, key: Option<&str>) {
        if self.json.is_some() {
            if let Some(k) = key {
                self.name(k);
            }
            self.begin(b'{');
        }
    }

    pub fn close_obj(&mut self) {
        if self.json.is_some() {
            self.end(b'}');
        }
    }

    /// `open_json_array(PRINT_JSON, key)`: JSON only.
    pub fn open_arr(&mut self, key: Option<&str>) {
        if self.json.is_some() {
            if let Some(k) = key {
                self.name(k);
            }
            self.begin(b'[');
            if self.json.as_ref().is_some_and(|j| j.pretty) {
                self.buf.push(b' ');
            }
        }
    }

    pub fn close_arr(&mut self) {
        if self.json.is_some() {
            self.end_array_raw();
        }
    }

    /// Text only.
    pub fn text(&mut self, s: &str) {
        if self.json.is_none() {
            self.buf.extend_from_slice(s.as_bytes());
        }
    }

    /// `print_string(PRINT_ANY, key, "PRE%sPOST", val)`.
    pub fn str(&mut self, key: Option<&str>, pre: &str, val: &str, post: &str) {
        if self.json.is_some() {
            self.key(key);
            self.quoted(val);
        } else {
            self.buf.extend_from_slice(pre.as_bytes());
            self.buf.extend_from_slice(val.as_bytes());
            self.buf.extend_from_slice(post.as_bytes());
        }
    }

    /// `print_uint(PRINT_ANY, key, "PRE%uPOST", val)` (and `print_int` for negative values).
    pub fn num(&mut self, key: Option<&str>, pre: &str, val: i64, post: &str) {
        if self.json.is_some() {
            self.key(key);
        } else {
            self.buf.extend_from_slice(pre.as_bytes());
        }
        let _ = write!(Sink(&mut self.buf), "{val}");
        if self.json.is_none() {
            self.buf.extend_from_slice(post.as_bytes());
        }
    }

    /// `print_float(PRINT_ANY, key, "PRE%gPOST", val)` (what `print_tv` prints times with).
    pub fn float(&mut self, key: Option<&str>, pre: &str, val: f64, post: &str) {
        if self.json.is_some() {
            self.key(key);
        } else {
            self.buf.extend_from_slice(pre.as_bytes());
        }
        self.buf.extend_from_slice(fmt_g(val).as_bytes());
        if self.json.is_none() {
            self.buf.extend_from_slice(post.as_bytes());
        }
    }

    /// A string value in JSON mode only.
    pub fn jstr(&mut self, key: Option<&str>, val: &str) {
        if self.json.is_some() {
            self.key(key);
            self.quoted(val);
        }
    }

    /// A number in JSON mode only.
    pub fn jnum(&mut self, key: Option<&str>, val: i64) {
        if self.json.is_some() {
            self.key(key);
            let _ = write!(Sink(&mut self.buf), "{val}");
        }
    }

    /// `print_null(PRINT_ANY, key, text, NULL)`: `"key":null` or the text.
    pub fn null(&mut self, key: &str, text: &str) {
        if self.json.is_some() {
            self.key(Some(key));
            self.buf.extend_from_slice(b"null");
        } else {
            self.buf.extend_from_slice(text.as_bytes());
        }
    }

    /// `print_bool(PRINT_ANY, key, text, val)`.
    pub fn boolean(&mut self, key: &str, text: &str, val: bool) {
        if self.json.is_some() {
            self.key(Some(key));
            self.buf
                .extend_from_slice(if val { b"true" } else { b"false" });
        } else if val {
            self.buf.extend_from_slice(text.as_bytes());
        }
    }
}

/// C's `%g`: six significant digits, trailing zeros dropped, exponent form below 1e-4 and
/// from 1e6 on.
pub fn fmt_g(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return if x == 0.0 { "0".into() } else { x.to_string() };
    }
    let sci = format!("{x:.5e}");
    let (mant, exp) = sci.split_once('e').expect("exponent form");
    let exp: i32 = exp.parse().expect("exponent");
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mant), exp.abs())
    } else {
        trim(&format!("{x:.*}", (5 - exp) as usize))
    }
}

struct Sink<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Sink<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(p: &mut Printer) {
        p.open_obj(None);
        p.str(Some("dst"), "", "203.0.113.0/24", " ");
        p.num(Some("metric"), "metric ", 10, " ");
        p.open_arr(Some("flags"));
        p.close_arr();
        p.open_arr(Some("metrics"));
        p.open_obj(None);
        p.num(Some("mtu"), "mtu ", 1400, " ");
        p.num(Some("advmss"), "advmss ", 1300, " ");
        p.close_obj();
        p.close_arr();
        p.text("\n");
        p.close_obj();
    }

    #[test]
    fn json_matches_iproute2() {
        // Shape of `ip -j route show table 100` (iproute2 6.1).
        let mut p = Printer::new(true, false);
        sample(&mut p);
        assert_eq!(
            String::from_utf8(p.finish()).unwrap(),
            "[{\"dst\":\"203.0.113.0/24\",\"metric\":10,\"flags\":[],\"metrics\":[{\"mtu\":1400,\"advmss\":1300}]}]\n"
        );
    }

    #[test]
    fn pretty_json_matches_iproute2() {
        // Shape of `ip -j -p route show table 100` (iproute2 6.1).
        let mut p = Printer::new(true, true);
        sample(&mut p);
        let want = "[ {\n        \"dst\": \"203.0.113.0/24\",\n        \"metric\": 10,\n        \"flags\": [ ],\n        \"metrics\": [ {\n                \"mtu\": 1400,\n                \"advmss\": 1300\n            } ]\n    } ]\n";
        assert_eq!(String::from_utf8(p.finish()).unwrap(), want);
    }

    /// What C's printf("%g") prints for the same values.
    #[test]
    fn floats_print_as_c_g() {
        for (x, s) in [
            (0.0, "0"),
            (0.04, "0.04"),
            (120.0, "120"),
            (94.67, "94.67"),
            (123456.0, "123456"),
            (1234567.0, "1.23457e+06"),
            (42949671.0, "4.29497e+07"),
            (0.00001, "1e-05"),
            (0.5, "0.5"),
        ] {
            assert_eq!(fmt_g(x), s);
        }
    }

    #[test]
    fn empty_json_is_an_empty_array() {
        assert_eq!(Printer::new(true, false).finish(), b"[]\n");
    }

    #[test]
    fn text_uses_the_templates() {
        let mut p = Printer::new(false, false);
        sample(&mut p);
        assert_eq!(
            String::from_utf8(p.finish()).unwrap(),
            "203.0.113.0/24 metric 10 mtu 1400 advmss 1300 \n"
        );
    }
}
