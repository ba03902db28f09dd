//! The parser of our header: the structs, fields, typedefs, enums,
//! `#define`s and functions that the checks compare with the real ones.

use crate::tokens::{is_ident, join, matching, parsing, set_parsing, split_top, strip_comments, tokenize, Other};
use crate::util::repo_root;
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

/// The `#define` of our headers that lists our own typedef names.
pub const OWN_TYPEDEFS: &str = "GRES_ABI_OWN_TYPEDEFS";

#[derive(Debug, Default)]
pub struct Header {
    pub structs: Vec<Struct>,
    pub enums: Vec<Enum>,
    pub aliases: Vec<Alias>,
    pub defines: Vec<String>,
    pub functions: Vec<Function>,
    /// Typedef names of ours that the release does not have
    /// (`#define GRES_ABI_OWN_TYPEDEFS List ...`).
    pub own_typedefs: Vec<String>,
}

/// A struct or union definition.  `name` is how C code names the type: the
/// typedef name, or `struct tag` when there is no typedef.
#[derive(Debug)]
pub struct Struct {
    pub name: String,
    /// `struct tag` when a typedef also gives the tag.
    pub tagged: Option<String>,
    pub fields: Vec<Field>,
}

#[derive(Debug)]
pub struct Field {
    pub name: String,
    /// The declaration with the name removed: a C type name.
    pub ty: String,
}

#[derive(Debug)]
pub struct Enum {
    pub name: String,
    pub enumerators: Vec<String>,
}

/// `typedef TYPE NAME;` without a body.
#[derive(Debug)]
pub struct Alias {
    pub name: String,
    pub ty: String,
    /// Alias of an incomplete `struct X` (a handle used only by pointer): no
    /// size, and the real type may have another tag or none.
    pub opaque: bool,
}

#[derive(Debug)]
pub struct Function {
    pub name: String,
    pub ret: String,
    pub params: String,
}

impl Function {
    pub fn prototype(&self) -> String {
        format!("{} {}({})", self.ret, self.name, self.params)
    }
}

impl Header {
    /// Guards against a parser regression silently checking nothing.
    pub fn assert_plausible(&self, hdr: &str) {
        for must in ["gres_slurmd_conf_t", "gres_device_t", "gres_job_state_t", "gres_step_state_t"] {
            assert!(self.structs.iter().any(|s| s.name == must), "parser found no struct {must} in {hdr}: {self:#?}");
        }
        assert!(self.structs.iter().all(|s| !s.fields.is_empty()), "struct without fields: {self:#?}");
        assert!(self.defines.iter().any(|d| d.starts_with("GRES_CONF_")), "no GRES_CONF_*: {self:#?}");
        assert!(!self.enums.is_empty() && !self.functions.is_empty(), "{self:#?}");
        for own in &self.own_typedefs {
            assert!(self.aliases.iter().any(|a| &a.name == own), "{hdr}: {OWN_TYPEDEFS} names {own}, which is no typedef of the header");
        }
    }
}

pub fn parse_header(path: &Path) -> Header {
    set_parsing(path.strip_prefix(repo_root()).unwrap_or(path).display().to_string());
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let text = strip_comments(&text).replace("\\\n", " ");
    let mut header = Header::default();
    let mut code = String::new();
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(directive) = t.strip_prefix('#') {
            parse_directive(directive.trim_start(), &mut header);
        } else {
            code.push_str(line);
            code.push('\n');
        }
    }
    let tokens = tokenize(&code, Other::Refuse);
    for stmt in split_top(&tokens, ";") {
        if stmt.is_empty() {
            continue;
        }
        parse_statement(stmt, &mut header);
    }
    // Resolve opaque aliases: `typedef struct X Y;` with no definition of X here.
    let defined: BTreeSet<String> = header.structs.iter().filter_map(|s| s.tagged.clone()).collect();
    for a in &mut header.aliases {
        let t: Vec<&str> = a.ty.split(' ').collect();
        a.opaque = t.len() == 2 && (t[0] == "struct" || t[0] == "union") && !defined.contains(&a.ty);
    }
    header
}

fn parse_directive(d: &str, header: &mut Header) {
    let Some(rest) = d.strip_prefix("define") else {
        return;
    };
    let rest = rest.trim_start();
    let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    let after = &rest[name.len()..];
    if after.starts_with('(') || after.trim().is_empty() {
        return; // function-like macro or include guard: no value to compare
    }
    if name == OWN_TYPEDEFS {
        header.own_typedefs.extend(after.split_whitespace().map(str::to_string));
        return;
    }
    header.defines.push(name);
}

fn parse_statement(stmt: &[String], header: &mut Header) {
    let unsupported = || -> ! { panic!("{}: unsupported declaration (extend tests/layout/header.rs): {}", parsing(), join(stmt)) };
    let is_typedef = stmt[0] == "typedef";
    let body = if is_typedef { &stmt[1..] } else { stmt };
    if let Some(open) = body.iter().position(|t| t == "{") {
        // struct/union/enum definition: KW [tag] { ... } [NAME]
        let kw = body[0].as_str();
        if !matches!(kw, "struct" | "union" | "enum") || open > 2 {
            unsupported();
        }
        let tag = (open == 2).then(|| format!("{kw} {}", body[1]));
        let close = matching(body, open);
        let inner = &body[open + 1..close];
        let name = match (&body[close + 1..], is_typedef) {
            ([n], true) if is_ident(n) => n.clone(),
            ([], false) => tag.clone().unwrap_or_else(|| unsupported()),
            _ => unsupported(),
        };
        if kw == "enum" {
            let enumerators = split_top(inner, ",")
                .into_iter()
                .filter(|e| !e.is_empty())
                .map(|e| {
                    assert!(is_ident(&e[0]), "{}: bad enumerator {}", parsing(), join(e));
                    e[0].clone()
                })
                .collect();
            header.enums.push(Enum { name, enumerators });
        } else {
            let fields = split_top(inner, ";")
                .into_iter()
                .filter(|f| !f.is_empty())
                .map(|f| {
                    let (name, ty) = parse_declarator(f);
                    Field { name, ty }
                })
                .collect();
            let tagged = if is_typedef { tag } else { None };
            header.structs.push(Struct { name, tagged, fields });
        }
    } else if is_typedef {
        let (name, ty) = parse_declarator(body);
        header.aliases.push(Alias { name, ty, opaque: false });
    } else {
        // function prototype: [extern] RET NAME ( PARAMS ) [__attribute__((...))]
        let body = if stmt[0] == "extern" { &stmt[1..] } else { stmt };
        let Some(open) = body.iter().position(|t| t == "(") else { unsupported() };
        if open < 2 || !is_ident(&body[open - 1]) {
            unsupported();
        }
        let close = matching(body, open);
        if !(close + 1 == body.len() || body[close + 1] == "__attribute__") {
            unsupported();
        }
        header.functions.push(Function { name: body[open - 1].clone(), ret: join(&body[..open - 1]), params: join(&body[open + 1..close]) });
    }
}

/// Splits one declaration (`char *path`, `int (*f)(char *a)`, `int a[4]`)
/// into the declared name and the type name left when the name is removed.
fn parse_declarator(decl: &[String]) -> (String, String) {
    let bad = |why: &str| -> ! { panic!("{}: {why} in `{}` (extend tests/layout/header.rs)", parsing(), join(decl)) };
    if split_top(decl, ",").len() > 1 {
        bad("several declarators");
    }
    if decl.iter().any(|t| t == ":") {
        bad("bit-field");
    }
    if decl.iter().any(|t| t == "{") {
        bad("nested definition");
    }
    let idx = if let Some(p) = decl.windows(2).position(|w| w[0] == "(" && w[1] == "*") {
        // pointer to function (or to array): the name follows `(*` and qualifiers
        (p + 2..decl.len()).find(|&i| is_ident(&decl[i]) && !matches!(decl[i].as_str(), "const" | "volatile" | "restrict")).unwrap_or_else(|| bad("no name"))
    } else {
        let mut end = decl.len();
        while end > 0 && decl[end - 1] == "]" {
            end = decl[..end].iter().rposition(|t| t == "[").unwrap_or_else(|| bad("bad array"));
        }
        end - 1
    };
    if !is_ident(&decl[idx]) || idx == 0 {
        bad("no name");
    }
    let mut ty: Vec<String> = decl.to_vec();
    let name = ty.remove(idx);
    (name, join(&ty))
}
