//! `cargo xtask entries`: the C ABI's provider table, generated from its
//! one list, `capi/entries.list`, into files a reader and an IDE can
//! open: the table's `extern "C"` slots (`capi/generated/slots.rs`,
//! included by `capi/src/provider_table.rs`) and libudat.a's consumer functions
//! (`capi/generated/consumer_calls.inc`, included by udat-static's
//! `dispatch.c`). `cargo xtask test` checks that the committed files are
//! what the list makes.

use std::fmt::Write;

const LIST: &str = "capi/entries.list";
const SLOTS: &str = "capi/generated/slots.rs";
const CONSUMER_CALLS: &str = "capi/generated/consumer_calls.inc";

/// The files the list makes, and what each should hold.
fn generated() -> Result<[(&'static str, String); 2], String> {
    let text = std::fs::read_to_string(LIST).map_err(|e| format!("{LIST}: {e}"))?;
    let list = parse(&text)?;
    Ok([(SLOTS, rust(&list)), (CONSUMER_CALLS, c(&list))])
}

/// Write the generated files.
pub fn write() -> Result<(), String> {
    for (path, text) in generated()? {
        std::fs::write(path, text).map_err(|e| format!("{path}: {e}"))?;
        eprintln!("xtask: wrote {path}");
    }
    Ok(())
}

/// The committed files are what the list makes.
pub fn check() -> Result<(), String> {
    for (path, text) in generated()? {
        let committed = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
        if committed != text {
            return Err(format!("{path} is not what {LIST} makes: run `cargo xtask entries` and commit the result"));
        }
    }
    Ok(())
}

/// One slot of `struct dat_provider`.
struct Entry {
    slot: String,
    body: Body,
    /// The consumer function libudat.a defines for the slot.
    export: Option<String>,
    args: Vec<(String, String)>,
}

/// What fills a slot.
enum Body {
    /// `module::function` under `crate::entry`; a door (`door:` before
    /// it) is generic over whether its provider shares its state among
    /// threads, and the table of each kind of provider fills the slot with
    /// its own.
    Rust { path: String, door: bool },
    /// A slot udat does not offer.
    NotOffered,
    /// A C function fills the slot.
    C(String),
}

/// The entries of `text`, in order; a malformed line is an error naming
/// it.
fn parse(text: &str) -> Result<Vec<Entry>, String> {
    let mut entries = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fail = |why: &str| format!("{LIST}:{}: {why}: {line}", i + 1);
        let mut rest = line;
        let [slot, body, export] = [(); 3].map(|()| word(&mut rest));
        if rest.is_empty() {
            return Err(fail("want a slot, a body, an export and arguments"));
        }
        let args = rest
            .split(',')
            .map(|arg| match arg.split_once(':') {
                Some((name, ty)) if !name.trim().is_empty() && !ty.trim().is_empty() => {
                    Ok((name.trim().to_string(), ty.trim().to_string()))
                }
                _ => Err(fail("an argument is not `name: type`")),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let body = match body {
            "-" => Body::NotOffered,
            b if b.starts_with("c:") => Body::C(b[2..].to_string()),
            b if b.contains("::") => match b.strip_prefix("door:") {
                Some(path) => Body::Rust { path: path.to_string(), door: true },
                None => Body::Rust { path: b.to_string(), door: false },
            },
            _ => return Err(fail("the body is not `module::function`, `door:module::function`, `-` or `c:symbol`")),
        };
        let export = (export != "-").then(|| export.to_string());
        entries.push(Entry { slot: slot.to_string(), body, export, args });
    }
    Ok(entries)
}

/// The next whitespace-separated word of `rest`, taken off it.
fn word<'a>(rest: &mut &'a str) -> &'a str {
    let s = rest.trim_start();
    let end = s.find(char::is_whitespace).unwrap_or(s.len());
    let (w, tail) = s.split_at(end);
    *rest = tail.trim_start();
    w
}

/// A C parameter type as Rust spells it: one level of pointer at most.
fn rust_type(c: &str) -> String {
    let plain = |t: &str| -> String {
        let t = t.trim();
        assert!(t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "entries.list: type `{c}` is not supported");
        t.to_string()
    };
    match c.strip_suffix('*') {
        Some(to) => match to.trim().strip_prefix("const ") {
            Some(to) => format!("*const {}", plain(to)),
            None => format!("*mut {}", plain(to)),
        },
        // A top-level `const` qualifies the parameter, not its type.
        None => plain(c.strip_prefix("const ").unwrap_or(c)),
    }
}

/// The Rust source: `table::<B, SHARES>()` and one `extern "C"` function
/// per slot that Rust fills.
fn rust(entries: &[Entry]) -> String {
    let mut s = String::from(
        "// Generated by `cargo xtask entries` from capi/entries.list: edit the list, not this.\n\n\
         /// The table for transport `B` of a provider that shares its state\n\
         /// among threads if `SHARES`; `device_name` is set by the instance.\n\
         pub fn table<B: Transport, const SHARES: bool>() -> DAT_PROVIDER {\n    DAT_PROVIDER {\n        \
         device_name: ptr::null(),\n        extension: ptr::null_mut(),\n",
    );
    for e in entries {
        let f = match &e.body {
            Body::C(symbol) => symbol.clone(),
            Body::NotOffered => format!("slot::{}", e.slot),
            Body::Rust { door: false, .. } => format!("slot::{}::<B>", e.slot),
            Body::Rust { door: true, .. } => format!("slot::{}::<B, SHARES>", e.slot),
        };
        writeln!(s, "        {}_func: Some({f}),", e.slot).unwrap();
    }
    s.push_str("    }\n}\n\n/// The slots, each handing its arguments to its body by position.\nmod slot {\n    use super::*;\n");
    for e in entries {
        let unused = matches!(e.body, Body::NotOffered);
        let params = e.args.iter().enumerate().map(|(i, (_, ty))| {
            let name = if unused { "_".to_string() } else { format!("a{}", i + 1) };
            format!("{name}: {}", rust_type(ty))
        });
        let params = params.collect::<Vec<_>>().join(", ");
        match &e.body {
            Body::C(_) => continue,
            Body::NotOffered => {
                write!(
                    s,
                    "\n    /// `{slot}_func`: udat does not offer it.\n    \
                     #[allow(clippy::too_many_arguments)]\n    \
                     pub(super) unsafe extern \"C\" fn {slot}({params}) -> DAT_RETURN {{\n        \
                     not_offered()\n    }}\n",
                    slot = e.slot,
                )
                .unwrap();
            }
            Body::Rust { path, door } => {
                let args = (1..=e.args.len()).map(|n| format!("Arg::<{n}, _>(a{n})")).collect::<Vec<_>>().join(", ");
                let (generics, turbofish, contract) = match door {
                    false => ("<B: Transport>", "<B>", ""),
                    true => (
                        "<B: Transport, const SHARES: bool>",
                        "<B, SHARES>",
                        " The table of a provider\n        // that shares fills the slot with `SHARES`, of any other without.",
                    ),
                };
                write!(
                    s,
                    "\n    /// `{slot}_func`.\n    \
                     #[allow(clippy::too_many_arguments)]\n    \
                     pub(super) unsafe extern \"C\" fn {slot}{generics}({params}) -> DAT_RETURN {{\n        \
                     // SAFETY: the body's contract is the DAT call's, which the caller keeps.{contract}\n        \
                     unsafe {{ crate::entry::{path}::{turbofish}({args}) }}\n    }}\n",
                    slot = e.slot,
                )
                .unwrap();
            }
        }
    }
    s.push_str("}\n");
    s
}

/// The `DAT_INVALID_HANDLE` subtype for a first argument of C type `ty`.
fn not_issued(ty: &str) -> &'static str {
    match ty {
        "DAT_IA_HANDLE" => "DAT_INVALID_HANDLE_IA",
        "DAT_EP_HANDLE" => "DAT_INVALID_HANDLE_EP",
        "DAT_LMR_HANDLE" => "DAT_INVALID_HANDLE_LMR",
        "DAT_RMR_HANDLE" => "DAT_INVALID_HANDLE_RMR",
        "DAT_PZ_HANDLE" => "DAT_INVALID_HANDLE_PZ",
        "DAT_PSP_HANDLE" => "DAT_INVALID_HANDLE_PSP",
        "DAT_RSP_HANDLE" => "DAT_INVALID_HANDLE_RSP",
        "DAT_CR_HANDLE" => "DAT_INVALID_HANDLE_CR",
        "DAT_CNO_HANDLE" => "DAT_INVALID_HANDLE_CNO",
        "DAT_SRQ_HANDLE" => "DAT_INVALID_HANDLE_SRQ",
        "DAT_CSP_HANDLE" => "DAT_INVALID_HANDLE_CSP",
        // An EVD's subtype names its role, which a refused handle has none of.
        _ => "DAT_NO_SUBTYPE",
    }
}

/// The C source of libudat.a's consumer functions: each refuses a first
/// handle no provider of the process issued, then calls its slot in the
/// provider table the handle's word points at.
fn c(entries: &[Entry]) -> String {
    let mut s =
        String::from("/* Generated by `cargo xtask entries` from capi/entries.list: edit the list, not this. */\n");
    for e in entries {
        let Some(export) = &e.export else { continue };
        let (first, first_ty) = &e.args[0];
        let variadic = e.args.last().is_some_and(|(_, ty)| ty == "va_list");
        let fixed = if variadic { &e.args[..e.args.len() - 1] } else { &e.args[..] };
        let mut params = fixed.iter().map(|(name, ty)| c_param(name, ty)).collect::<Vec<_>>();
        if variadic {
            params.push("...".into());
        }
        let names = e.args.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>().join(", ");
        write!(
            s,
            "\nDAT_RETURN DAT_API {export}({})\n{{\n\tconst DAT_PROVIDER *provider = udat_handle_provider({first});\n\n\tif (provider == NULL)\n\t\treturn DAT_CLASS_ERROR | DAT_INVALID_HANDLE | {};\n",
            params.join(", "),
            not_issued(first_ty),
        )
        .unwrap();
        let call = format!("provider->{}_func({names})", e.slot);
        if variadic {
            let (list, _) = e.args.last().unwrap();
            let (before, _) = &fixed[fixed.len() - 1];
            write!(
                s,
                "\t{{\n\t\tDAT_RETURN ret;\n\t\tva_list {list};\n\n\t\tva_start({list}, {before});\n\t\tret = {call};\n\t\tva_end({list});\n\t\treturn ret;\n\t}}\n}}\n"
            )
            .unwrap();
        } else {
            writeln!(s, "\treturn {call};\n}}").unwrap();
        }
    }
    s
}

/// A C parameter declaration: `type name`, with a pointer's star by the name.
fn c_param(name: &str, ty: &str) -> String {
    match ty.strip_suffix('*') {
        Some(to) => format!("{} *{name}", to.trim()),
        None => format!("{ty} {name}"),
    }
}
