//! A company's network of partners (contract §14) for people: the `data` of `GET
//! /api/v1/companies/{cnpj}/network` drawn as an SVG picture (no script, nothing fetched: a shape
//! and a colour per kind of node, the labels cut to fit with the whole name in a `<title>`, a
//! legend, the company asked about set apart, a cut network said so), for a screen 360 px wide
//! and one 1440 px wide; and the same data as files: the links as CSV, and GraphML.
//!
//! The layout is fjadra's (d3-force's forces ported to Rust), not ours: pure Rust with no
//! dependencies, MIT/Apache, kept up by Rerun for its graph view; deterministic (it starts from a
//! fixed spiral and its only randomness is a fixed-seed LCG, so the same network gives the same
//! bytes); its repulsion is Barnes-Hut (n log n). Its places are then snapped to a grid of
//! label-wide cells, which keeps the picture to its width and no label over another. Passed over:
//! layout-rs (layered, Graphviz-like: a company's hundred partners make one row, far too wide
//! for a phone), fdg-sim (its start comes from a process-wide RNG: not reproducible under
//! concurrent requests) and forceatlas2 (AGPL). Measured once on this 2-core machine (test
//! build): 500 nodes drawn in about 250 ms at either width, within the 500 ms budget.

use std::collections::HashMap;
use std::fmt::Write;

use fjadra::{Collide, Link, ManyBody, Node as Particle, PositionX, PositionY, SimulationBuilder};
use serde::Deserialize;
use serde_json::Value;

use crate::export::cell;
use crate::i18n::{Lang, fill};
use crate::show;

/// The network answer's `data`, as the picture and the files read it.
#[derive(Clone, Debug, Deserialize)]
pub struct Network {
    /// The company asked about (its node's id).
    pub root: String,
    pub depth: u64,
    pub max_nodes: u64,
    #[serde(default)]
    pub active_only: bool,
    pub truncated: bool,
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
}

/// A company (`kind` `company`, id its `cnpj_basico`) or a partner (`partner`, id its `partner_id`).
#[derive(Clone, Debug, Deserialize)]
pub struct Node {
    pub id: String,
    pub kind: String,
    pub label: String,
    pub level: u64,
    #[serde(default)]
    pub cnpj: Option<String>,
    #[serde(default)]
    pub uf: Option<String>,
    #[serde(default)]
    pub situacao_cadastral: Option<String>,
    #[serde(default)]
    pub tipo: Option<String>,
    #[serde(default)]
    pub documento: Option<String>,
    #[serde(default)]
    pub identity: Option<String>,
}

/// `partner_of` (a partner to its company) or `is_company` (a legal-entity partner to its own company).
#[derive(Clone, Debug, Deserialize)]
pub struct Edge {
    pub from: String,
    pub to: String,
    pub kind: String,
    #[serde(default)]
    pub qualificacao: Option<String>,
    #[serde(default)]
    pub qualificacao_descricao: Option<String>,
    #[serde(default)]
    pub data_entrada: Option<String>,
}

impl Network {
    /// The network answer's `data` object.
    pub fn parse(data: &Value) -> Result<Network, serde_json::Error> {
        Network::deserialize(data)
    }
}

/// The two widths the picture is drawn for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    /// 360 px: a phone.
    Narrow,
    /// 1440 px: a wide screen.
    Wide,
}

/// How a width draws: sizes in pixels.
struct Look {
    width: f64,
    font: f64,
    /// The widest label; longer ones end in `…`.
    label: f64,
    /// A shape's height.
    shape: f64,
    legend_columns: usize,
    /// A cell of the grid the nodes are set on, across: the widest label and a gap.
    cell: f64,
}

impl Width {
    pub fn px(self) -> u32 {
        match self {
            Width::Narrow => 360,
            Width::Wide => 1440,
        }
    }

    fn look(self) -> Look {
        match self {
            Width::Narrow => {
                Look { width: 360.0, font: 11.0, label: 104.0, shape: 16.0, legend_columns: 2, cell: 113.0 }
            }
            Width::Wide => {
                Look { width: 1440.0, font: 13.0, label: 196.0, shape: 20.0, legend_columns: 4, cell: 236.0 }
            }
        }
    }
}

/// What a node is drawn as: a shape and a colour each, told apart by both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mark {
    /// The company asked about: a large dark rounded rectangle.
    Root,
    /// A company: a rounded rectangle.
    Company,
    /// A person: a circle.
    Person,
    /// A legal entity as a partner: a diamond.
    Entity,
    /// A foreign partner: a triangle.
    Foreign,
}

impl Mark {
    const ALL: [Mark; 5] = [Mark::Root, Mark::Company, Mark::Person, Mark::Entity, Mark::Foreign];

    fn of(node: &Node, root: &str) -> Mark {
        match (node.kind.as_str(), node.tipo.as_deref()) {
            ("company", _) if node.id == root => Mark::Root,
            ("company", _) => Mark::Company,
            (_, Some("1")) => Mark::Entity,
            (_, Some("3")) => Mark::Foreign,
            _ => Mark::Person,
        }
    }

    fn class(self) -> &'static str {
        match self {
            Mark::Root => "root",
            Mark::Company => "company",
            Mark::Person => "person",
            Mark::Entity => "entity",
            Mark::Foreign => "foreign",
        }
    }

    /// The legend's word for it.
    fn word(self) -> &'static str {
        match self {
            Mark::Root => "net_root",
            Mark::Company => "net_company",
            Mark::Person => "net_person",
            Mark::Entity => "net_entity",
            Mark::Foreign => "net_foreign",
        }
    }

    /// Fill and stroke: light fills, strokes of at least 3:1 against white (WCAG's for shapes).
    fn colours(self) -> (&'static str, &'static str) {
        match self {
            Mark::Root => ("#1d4ed8", "#172554"),
            Mark::Company => ("#dbeafe", "#1d4ed8"),
            Mark::Person => ("#ffedd5", "#c2410c"),
            Mark::Entity => ("#ede9fe", "#6d28d9"),
            Mark::Foreign => ("#dcfce7", "#15803d"),
        }
    }

    /// Half the shape's width and height, for a shape `s` high.
    fn half(self, s: f64) -> (f64, f64) {
        match self {
            Mark::Root => (s * 1.1, s * 0.7),
            Mark::Company => (s * 0.8, s * 0.5),
            Mark::Person => (s * 0.5, s * 0.5),
            Mark::Entity | Mark::Foreign => (s * 0.65, s * 0.6),
        }
    }

    /// How far from the centre the shape's edge is, going along the unit vector `(ux, uy)`.
    fn reach(self, s: f64, ux: f64, uy: f64) -> f64 {
        let (hw, hh) = self.half(s);
        let (ax, ay) = (ux.abs().max(1e-9), uy.abs().max(1e-9));
        match self {
            Mark::Person => hw,
            Mark::Entity => 1.0 / (ax / hw + ay / hh),
            _ => (hw / ax).min(hh / ay),
        }
    }

    /// The shape centred on `(x, y)`.
    fn draw(self, out: &mut String, x: f64, y: f64, s: f64) {
        let (fill, stroke) = self.colours();
        let (hw, hh) = self.half(s);
        let width = if self == Mark::Root { 2.5 } else { 1.5 };
        let paint = format!(r#"fill="{fill}" stroke="{stroke}" stroke-width="{width}""#);
        let _ = match self {
            Mark::Root | Mark::Company => writeln!(
                out,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" rx="{:.1}" {paint}/>"#,
                x - hw,
                y - hh,
                2.0 * hw,
                2.0 * hh,
                s * 0.25
            ),
            Mark::Person => writeln!(out, r#"<circle cx="{x:.1}" cy="{y:.1}" r="{hw:.1}" {paint}/>"#),
            Mark::Entity => writeln!(
                out,
                r#"<polygon points="{:.1},{:.1} {:.1},{:.1} {:.1},{:.1} {:.1},{:.1}" {paint}/>"#,
                x,
                y - hh,
                x + hw,
                y,
                x,
                y + hh,
                x - hw,
                y
            ),
            Mark::Foreign => writeln!(
                out,
                r#"<polygon points="{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}" {paint}/>"#,
                x,
                y - hh,
                x + hw,
                y + hh,
                x - hw,
                y + hh
            ),
        };
    }
}

/// The word (an i18n key) for what `node` is: the company asked about, a company, or a kind of
/// partner, as the legend says it.
pub(crate) fn kind_word(node: &Node, root: &str) -> &'static str {
    Mark::of(node, root).word()
}

/// Text as XML writes it in an element or an attribute: `&<>"'` escaped, and what XML 1.0 cannot
/// hold (control characters but tab and line breaks, U+FFFE, U+FFFF) as U+FFFD.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if c < ' ' || c == '\u{fffe}' || c == '\u{ffff}' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// A character's width in ems, about (sans-serif; names are mostly capitals): a little wide, so
/// that a label fits where it was measured to fit.
fn em(c: char) -> f64 {
    match c {
        'M' | 'W' | 'm' | 'w' | '@' => 0.92,
        'I' | 'i' | 'j' | 'l' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' => 0.3,
        ' ' | '-' | '(' | ')' | '/' => 0.36,
        'a'..='z' => 0.56,
        '0'..='9' => 0.58,
        _ => 0.7,
    }
}

fn text_px(text: &str, font: f64) -> f64 {
    text.chars().map(em).sum::<f64>() * font
}

/// `text` as it fits in `max` pixels: whole, or cut with `…`.
fn fit(text: &str, max: f64, font: f64) -> String {
    let text = text.trim();
    if text_px(text, font) <= max {
        return text.to_owned();
    }
    let mut out = String::new();
    let mut used = em('…') * font;
    for c in text.chars() {
        used += em(c) * font;
        if used > max {
            break;
        }
        out.push(c);
    }
    out.truncate(out.trim_end().len());
    out.push('…');
    out
}

/// A node as drawn: its mark, its label as shown, and its footprint (shape over label).
struct Drawn {
    mark: Mark,
    label: String,
    font: f64,
    size: (f64, f64),
}

impl Drawn {
    fn of(node: &Node, root: &str, look: &Look) -> Drawn {
        let mark = Mark::of(node, root);
        let font = if mark == Mark::Root { look.font + 1.0 } else { look.font };
        let label = fit(&node.label, look.label, font);
        let (hw, hh) = mark.half(look.shape);
        let size = ((2.0 * hw).max(text_px(&label, font)), 2.0 * hh + 3.0 + font * 1.25);
        Drawn { mark, label, font, size }
    }

    /// The shape's centre, for a footprint centred on `(x, y)`.
    fn shape_at(&self, x: f64, y: f64, look: &Look) -> (f64, f64) {
        (x, y - self.size.1 / 2.0 + self.mark.half(look.shape).1)
    }
}

/// Where each node is, as fjadra lays the network out (links as springs, nodes repelling each
/// other and never on top of each other, a pull to the centre), the company asked about held at
/// the centre: only the nodes' places relative to each other, in no unit.
fn place(net: &Network) -> Vec<(f64, f64)> {
    let index: HashMap<&str, usize> = net.nodes.iter().enumerate().map(|(i, n)| (n.id.as_str(), i)).collect();
    let links: Vec<(usize, usize)> = net
        .edges
        .iter()
        .filter_map(|e| Some((*index.get(e.from.as_str())?, *index.get(e.to.as_str())?)))
        .filter(|(a, b)| a != b)
        .collect();
    let root = index.get(net.root.as_str()).copied();
    let particles = (0..net.nodes.len())
        .map(|i| if Some(i) == root { Particle::default().fixed_position(0.0, 0.0) } else { Particle::default() });
    // d3-force's defaults, cooled in 100 ticks rather than 300 (a third of the time; the grid
    // takes no finer places than these).
    let mut simulation = SimulationBuilder::default()
        .with_alpha_decay(1.0 - 0.001f64.powf(1.0 / 100.0))
        .build(particles)
        .add_force("link", Link::new(links))
        .add_force("charge", ManyBody::new())
        .add_force("collide", Collide::new().radius(|_| 5.0))
        .add_force("x", PositionX::new().strength(0.05))
        .add_force("y", PositionY::new().strength(0.05));
    simulation.step();
    simulation.positions().map(|[x, y]| (x, y)).collect()
}

/// Margin around the picture, in pixels.
const MARGIN: f64 = 10.0;

/// A grid of cells, each wide enough for the widest label: the layout's places are snapped to it
/// (each node, the company asked about first, to the free cell nearest its place, spread over
/// the grid), so that no two labels overlap and the picture keeps to its width; rows left empty
/// are dropped. Answers each node's cell (column, row).
fn snap(at: &[(f64, f64)], columns: usize) -> Vec<(usize, usize)> {
    let n = at.len();
    if n == 0 {
        return Vec::new();
    }
    // Room for half as many nodes again, so that the layout's shape shows through; a small
    // network on a grid about as many cells across as down.
    let columns = columns.min(((n * 3 / 2) as f64).sqrt().ceil() as usize).max(1);
    let rows = (n * 3 / 2).div_ceil(columns).max(1);
    let (low, high) = at.iter().fold(((f64::MAX, f64::MAX), (f64::MIN, f64::MIN)), |(l, h), p| {
        ((l.0.min(p.0), l.1.min(p.1)), (h.0.max(p.0), h.1.max(p.1)))
    });
    let spread = |v: f64, l: f64, h: f64, cells: usize| (v - l) / (h - l).max(1e-9) * (cells - 1) as f64;
    let mut taken = vec![false; columns * rows];
    let mut cells = vec![(0, 0); n];
    for (i, p) in at.iter().enumerate() {
        let (want_x, want_y) = (spread(p.0, low.0, high.0, columns), spread(p.1, low.1, high.1, rows));
        let best = (0..columns * rows)
            .filter(|c| !taken[*c])
            .min_by(|a, b| {
                let d = |c: usize| ((c % columns) as f64 - want_x).powi(2) + ((c / columns) as f64 - want_y).powi(2);
                d(*a).total_cmp(&d(*b))
            })
            .unwrap_or(0);
        taken[best] = true;
        cells[i] = (best % columns, best / columns);
    }
    let mut used: Vec<usize> = cells.iter().map(|c| c.1).collect();
    used.sort_unstable();
    used.dedup();
    cells.iter().map(|&(x, y)| (x, used.binary_search(&y).unwrap_or(0))).collect()
}

/// The cells as the footprints' centres in the picture, the grid centred across, from `top`;
/// answers the picture's height.
fn lay_out(cells: &[(usize, usize)], drawn: &[Drawn], look: &Look, top: f64) -> (Vec<(f64, f64)>, f64) {
    let columns = cells.iter().map(|c| c.0 + 1).max().unwrap_or(0);
    let rows = cells.iter().map(|c| c.1 + 1).max().unwrap_or(0);
    let cell_height = drawn.iter().map(|d| d.size.1).fold(0.0, f64::max) + look.font * 1.6;
    let left = (look.width - columns as f64 * look.cell) / 2.0;
    let at = cells
        .iter()
        .map(|&(x, y)| (left + (x as f64 + 0.5) * look.cell, top + (y as f64 + 0.5) * cell_height))
        .collect();
    (at, top + rows as f64 * cell_height + MARGIN)
}

/// The legend (a shape or a line and its word, in columns) from `top`; answers where it ends.
fn legend(out: &mut String, look: &Look, lang: Lang, id: &str, top: f64) -> f64 {
    let column = (look.width - 2.0 * MARGIN) / look.legend_columns as f64;
    let row = look.shape * 1.6;
    let swatch = look.shape * 2.4;
    out.push_str("<g class=\"legend\">\n");
    let items = Mark::ALL.len() + 2;
    for i in 0..items {
        let x = MARGIN + (i % look.legend_columns) as f64 * column;
        let y = top + (i / look.legend_columns) as f64 * row + row / 2.0;
        let word = match Mark::ALL.get(i) {
            Some(mark) => {
                mark.draw(out, x + swatch / 2.0, y, look.shape * 0.8);
                mark.word()
            }
            None if i == Mark::ALL.len() => {
                let _ = writeln!(
                    out,
                    r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#475569" stroke-width="1.5" marker-end="url(#{id}-arrow)"/>"##,
                    x + 2.0,
                    x + swatch - 2.0
                );
                "net_partner_of"
            }
            None => {
                let _ = writeln!(
                    out,
                    r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#6d28d9" stroke-width="1.5" stroke-dasharray="4 3"/>"##,
                    x + 2.0,
                    x + swatch - 2.0
                );
                "net_is_company"
            }
        };
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{:.1}" fill="#111827">{}</text>"##,
            x + swatch + 6.0,
            y + look.font * 0.35,
            xml(lang.t(word))
        );
    }
    out.push_str("</g>\n");
    top + items.div_ceil(look.legend_columns) as f64 * row
}

/// The words of the picture's `<title>` and `<desc>`.
fn summary(net: &Network, lang: Lang) -> (String, String) {
    let root = net.nodes.iter().find(|n| n.id == net.root).map_or(net.root.as_str(), |n| n.label.as_str());
    let companies = net.nodes.iter().filter(|n| n.kind == "company").count() as u64;
    let partners = net.nodes.len() as u64 - companies;
    let counts = [companies, partners, net.edges.len() as u64, net.depth].map(|n| show::count(lang, n));
    let mut desc = fill(lang.t("net_desc"), &counts.each_ref().map(String::as_str));
    if net.truncated {
        desc.push(' ');
        desc.push_str(&fill(lang.t("net_truncated"), &[&show::count(lang, net.max_nodes)]));
    }
    (fill(lang.t("net_title"), &[root]), desc)
}

/// A node's whole name and what it is, for its `<title>`.
fn node_title(node: &Node, mark: Mark, lang: Lang) -> String {
    let document = match (&node.cnpj, &node.documento) {
        (Some(cnpj), _) => show::cnpj(cnpj),
        (None, Some(documento)) if !documento.is_empty() => documento.clone(),
        _ => node.id.clone(),
    };
    format!("{} ({}, {document})", node.label, lang.t(mark.word()))
}

/// How far a link bows out of the straight line, as a share of its length: on a grid, a straight
/// link would run over the nodes lined up between its ends.
const BEND: f64 = 0.12;

/// A link's curve, from shape edge to shape edge, with its `<title>` (who, what, since when).
fn edge_line(out: &mut String, edge: &Edge, ends: [(f64, f64, Mark, &str); 2], look: &Look, lang: Lang, id: &str) {
    let [(x1, y1, from, from_label), (x2, y2, to, to_label)] = ends;
    let length = (x2 - x1).hypot(y2 - y1);
    if length < 1.0 {
        return;
    }
    let (cx, cy) = ((x1 + x2) / 2.0 - (y2 - y1) * BEND, (y1 + y2) / 2.0 + (x2 - x1) * BEND);
    let unit = |dx: f64, dy: f64| (dx / dx.hypot(dy).max(1e-9), dy / dx.hypot(dy).max(1e-9));
    let ((ux1, uy1), (ux2, uy2)) = (unit(cx - x1, cy - y1), unit(x2 - cx, y2 - cy));
    let (start, end) = (from.reach(look.shape, ux1, uy1), to.reach(look.shape, ux2, uy2) + 1.0);
    let is_company = edge.kind == "is_company";
    let what = if is_company {
        lang.t("net_is_company").to_owned()
    } else {
        let role = edge.qualificacao_descricao.as_deref().or(edge.qualificacao.as_deref());
        let since = edge.data_entrada.as_deref().map(|d| show::date(lang, d));
        [Some(lang.t("net_partner_of")), role, since.as_deref()].into_iter().flatten().collect::<Vec<_>>().join(", ")
    };
    let style = if is_company {
        r##"stroke="#6d28d9" stroke-dasharray="4 3""##.to_owned()
    } else {
        format!(r##"stroke="#475569" marker-end="url(#{id}-arrow)""##)
    };
    let _ = writeln!(
        out,
        r#"<path class="{}" d="M{:.1},{:.1}Q{cx:.1},{cy:.1} {:.1},{:.1}" {style} stroke-width="1.2"><title>{}</title></path>"#,
        xml(&edge.kind),
        x1 + ux1 * start,
        y1 + uy1 * start,
        x2 - ux2 * end,
        y2 - uy2 * end,
        xml(&format!("{from_label} → {to_label}: {what}"))
    );
}

/// The network drawn for `width`, its words in `lang`: an SVG document (`role="img"`, a
/// `<title>` and a `<desc>`, ids unique to the width, so both drawings can sit in one page).
pub fn svg(net: &Network, width: Width, lang: Lang) -> String {
    let look = width.look();
    let id = format!("net{}", width.px());
    let drawn: Vec<Drawn> = net.nodes.iter().map(|n| Drawn::of(n, &net.root, &look)).collect();
    let cells = snap(&place(net), ((look.width - 2.0 * MARGIN) / look.cell) as usize);
    let mut head = String::new();
    let mut top = legend(&mut head, &look, lang, &id, MARGIN) + look.font;
    let (title, desc) = summary(net, lang);
    if net.truncated {
        let warning = fill(lang.t("net_truncated"), &[&show::count(lang, net.max_nodes)]);
        let _ = writeln!(
            head,
            r##"<text class="truncated" x="{MARGIN}" y="{:.1}" fill="#b91c1c" font-weight="bold">{}</text>"##,
            top + look.font,
            xml(&warning)
        );
        top += look.font * 2.0;
    }
    let (at, height) = lay_out(&cells, &drawn, &look, top + look.font);
    let mut out = String::with_capacity(300 * (net.nodes.len() + net.edges.len()) + 4000);
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h:.0}" viewBox="0 0 {w} {h:.0}" role="img" aria-labelledby="{id}-title {id}-desc" font-family="sans-serif" font-size="{f}">"#,
        w = width.px(),
        h = height.ceil(),
        f = look.font
    );
    let _ = writeln!(out, r#"<title id="{id}-title">{}</title>"#, xml(&title));
    let _ = writeln!(out, r#"<desc id="{id}-desc">{}</desc>"#, xml(&desc));
    let _ = writeln!(
        out,
        r##"<defs><marker id="{id}-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0L10,5L0,10z" fill="#475569"/></marker></defs>"##
    );
    let _ = writeln!(out, r##"<rect class="background" width="100%" height="100%" fill="#ffffff"/>"##);
    out.push_str(&head);
    edges(&mut out, net, &drawn, &at, &look, lang, &id);
    nodes(&mut out, net, &drawn, &at, &look, lang);
    out.push_str("</svg>\n");
    out
}

fn edges(out: &mut String, net: &Network, drawn: &[Drawn], at: &[(f64, f64)], look: &Look, lang: Lang, id: &str) {
    let index: HashMap<&str, usize> = net.nodes.iter().enumerate().map(|(i, n)| (n.id.as_str(), i)).collect();
    out.push_str("<g class=\"edges\" fill=\"none\">\n");
    for edge in &net.edges {
        let (Some(&a), Some(&b)) = (index.get(edge.from.as_str()), index.get(edge.to.as_str())) else { continue };
        let end = |i: usize| {
            let (x, y) = drawn[i].shape_at(at[i].0, at[i].1, look);
            (x, y, drawn[i].mark, net.nodes[i].label.as_str())
        };
        edge_line(out, edge, [end(a), end(b)], look, lang, id);
    }
    out.push_str("</g>\n");
}

fn nodes(out: &mut String, net: &Network, drawn: &[Drawn], at: &[(f64, f64)], look: &Look, lang: Lang) {
    out.push_str("<g class=\"nodes\">\n");
    for ((node, d), &(x, y)) in net.nodes.iter().zip(drawn).zip(at) {
        let _ = writeln!(out, "<g class=\"node {}\">", d.mark.class());
        let _ = writeln!(out, "<title>{}</title>", xml(&node_title(node, d.mark, lang)));
        let (sx, sy) = d.shape_at(x, y, look);
        d.mark.draw(out, sx, sy, look.shape);
        let bold = if d.mark == Mark::Root { r#" font-weight="bold""# } else { "" };
        // A white halo under the letters keeps them readable over the lines that cross them.
        let _ = writeln!(
            out,
            r##"<text x="{x:.1}" y="{:.1}" text-anchor="middle" font-size="{}"{bold} fill="#111827" stroke="#ffffff" stroke-width="3" stroke-linejoin="round" paint-order="stroke">{}</text>"##,
            y + d.size.1 / 2.0 - d.font * 0.25,
            d.font,
            xml(&d.label)
        );
        out.push_str("</g>\n");
    }
    out.push_str("</g>\n");
}

/// The links as CSV (lines end in CRLF): `from,to,kind,qualificacao,data_entrada,from_label,
/// to_label`, each cell guarded for spreadsheets as the search's export guards it.
pub fn csv(net: &Network) -> String {
    let labels: HashMap<&str, &str> = net.nodes.iter().map(|n| (n.id.as_str(), n.label.as_str())).collect();
    let mut out = String::from("from,to,kind,qualificacao,data_entrada,from_label,to_label\r\n");
    for edge in &net.edges {
        let label = |id: &str| labels.get(id).copied().unwrap_or_default();
        let cells = [
            edge.from.as_str(),
            edge.to.as_str(),
            edge.kind.as_str(),
            edge.qualificacao.as_deref().unwrap_or_default(),
            edge.data_entrada.as_deref().unwrap_or_default(),
            label(&edge.from),
            label(&edge.to),
        ];
        out.push_str(&cells.map(cell).join(","));
        out.push_str("\r\n");
    }
    out
}

/// GraphML's keys: (id, for, name, type).
const KEYS: [(&str, &str, &str, &str); 18] = [
    ("g_root", "graph", "root", "string"),
    ("g_depth", "graph", "depth", "int"),
    ("g_max_nodes", "graph", "max_nodes", "int"),
    ("g_active_only", "graph", "active_only", "boolean"),
    ("g_truncated", "graph", "truncated", "boolean"),
    ("n_kind", "node", "kind", "string"),
    ("n_label", "node", "label", "string"),
    ("n_level", "node", "level", "int"),
    ("n_cnpj", "node", "cnpj", "string"),
    ("n_uf", "node", "uf", "string"),
    ("n_situacao_cadastral", "node", "situacao_cadastral", "string"),
    ("n_tipo", "node", "tipo", "string"),
    ("n_documento", "node", "documento", "string"),
    ("n_identity", "node", "identity", "string"),
    ("e_kind", "edge", "kind", "string"),
    ("e_qualificacao", "edge", "qualificacao", "string"),
    ("e_qualificacao_descricao", "edge", "qualificacao_descricao", "string"),
    ("e_data_entrada", "edge", "data_entrada", "string"),
];

/// `<data>` elements for the values given (none for a value absent).
fn data(out: &mut String, values: &[(&str, Option<&str>)]) {
    for (key, value) in values {
        if let Some(value) = value {
            let _ = writeln!(out, r#"    <data key="{key}">{}</data>"#, xml(value));
        }
    }
}

/// The network as GraphML (directed; a key per field, each node and link with its values), as
/// Gephi, networkx and Neo4j's APOC read it.
pub fn graphml(net: &Network) -> String {
    let mut out = String::from(concat!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
        "<graphml xmlns=\"http://graphml.graphdrawing.org/xmlns\" ",
        "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" ",
        "xsi:schemaLocation=\"http://graphml.graphdrawing.org/xmlns ",
        "http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd\">\n"
    ));
    for (id, what, name, kind) in KEYS {
        let _ = writeln!(out, r#"  <key id="{id}" for="{what}" attr.name="{name}" attr.type="{kind}"/>"#);
    }
    out.push_str("  <graph id=\"network\" edgedefault=\"directed\">\n");
    let (depth, max_nodes) = (net.depth.to_string(), net.max_nodes.to_string());
    let flag = |b: bool| if b { "true" } else { "false" };
    data(
        &mut out,
        &[
            ("g_root", Some(&net.root)),
            ("g_depth", Some(&depth)),
            ("g_max_nodes", Some(&max_nodes)),
            ("g_active_only", Some(flag(net.active_only))),
            ("g_truncated", Some(flag(net.truncated))),
        ],
    );
    for node in &net.nodes {
        let _ = writeln!(out, r#"   <node id="{}">"#, xml(&node.id));
        let level = node.level.to_string();
        data(
            &mut out,
            &[
                ("n_kind", Some(&node.kind)),
                ("n_label", Some(&node.label)),
                ("n_level", Some(&level)),
                ("n_cnpj", node.cnpj.as_deref()),
                ("n_uf", node.uf.as_deref()),
                ("n_situacao_cadastral", node.situacao_cadastral.as_deref()),
                ("n_tipo", node.tipo.as_deref()),
                ("n_documento", node.documento.as_deref()),
                ("n_identity", node.identity.as_deref()),
            ],
        );
        out.push_str("   </node>\n");
    }
    for edge in &net.edges {
        let _ = writeln!(out, r#"   <edge source="{}" target="{}">"#, xml(&edge.from), xml(&edge.to));
        data(
            &mut out,
            &[
                ("e_kind", Some(&edge.kind)),
                ("e_qualificacao", edge.qualificacao.as_deref()),
                ("e_qualificacao_descricao", edge.qualificacao_descricao.as_deref()),
                ("e_data_entrada", edge.data_entrada.as_deref()),
            ],
        );
        out.push_str("   </edge>\n");
    }
    out.push_str("  </graph>\n</graphml>\n");
    out
}

#[cfg(test)]
mod tests {
    use quick_xml::events::Event;
    use serde_json::json;

    use super::*;

    /// A network as the API answers it: the company asked about, a person, a legal entity joined to
    /// its own company, a foreign partner, a company of the person's, names to escape and to cut.
    fn sample(truncated: bool) -> Value {
        json!({
            "root": "11222333", "depth": 2, "max_nodes": 7, "active_only": false, "truncated": truncated,
            "nodes": [
                {"id": "11222333", "kind": "company", "label": "EMPRESA EXEMPLO LTDA", "level": 0,
                 "cnpj": "11222333000181", "uf": "SP", "situacao_cadastral": "02"},
                {"id": "pjnrquzm2ntgqdkaa", "kind": "partner", "label": "JOSE DA SILVA", "level": 1,
                 "tipo": "2", "documento": "***456789**", "identity": "name_and_masked_document"},
                {"id": "paaaaaaaaaaaaaaaa", "kind": "partner", "label": "=HOLDING <A&B> \"PARTICIPACOES\" S.A.", "level": 1,
                 "tipo": "1", "documento": "44555666000199", "identity": "company"},
                {"id": "pbbbbbbbbbbbbbbbb", "kind": "partner", "label": "FOREIGN INVESTMENTS\u{1} LIMITED", "level": 1,
                 "tipo": "3", "documento": "", "identity": "name_and_country"},
                {"id": "44555666", "kind": "company", "label": "HOLDING A&B PARTICIPACOES SOCIEDADE ANONIMA DE NOME LONGO", "level": 1,
                 "cnpj": "44555666000199", "uf": "RJ", "situacao_cadastral": "02"},
                {"id": "77888999", "kind": "company", "label": "SILVA, COMERCIO DE ALIMENTOS", "level": 2,
                 "cnpj": null, "uf": null, "situacao_cadastral": null}
            ],
            "edges": [
                {"from": "paaaaaaaaaaaaaaaa", "to": "11222333", "kind": "partner_of", "qualificacao": "22",
                 "qualificacao_descricao": "Sócio", "data_entrada": "2019-05-02"},
                {"from": "paaaaaaaaaaaaaaaa", "to": "44555666", "kind": "is_company", "qualificacao": null,
                 "data_entrada": null},
                {"from": "pbbbbbbbbbbbbbbbb", "to": "11222333", "kind": "partner_of", "qualificacao": "37",
                 "qualificacao_descricao": "Sócio Pessoa Jurídica Domiciliado no Exterior", "data_entrada": "2021-01-10"},
                {"from": "pjnrquzm2ntgqdkaa", "to": "11222333", "kind": "partner_of", "qualificacao": "49",
                 "qualificacao_descricao": "Sócio-Administrador", "data_entrada": "2020-01-01"},
                {"from": "pjnrquzm2ntgqdkaa", "to": "77888999", "kind": "partner_of", "qualificacao": "49",
                 "qualificacao_descricao": "Sócio-Administrador", "data_entrada": "-2001"}
            ]
        })
    }

    /// A made-up network of `n` nodes: the root, partners of it, their other companies and those
    /// companies' partners, in BFS order as the API gives them.
    fn generated(n: usize) -> Network {
        let mut nodes = vec![json!({"id": "00000000", "kind": "company", "label": "EMPRESA RAIZ LTDA", "level": 0})];
        let mut edges = Vec::new();
        for i in 1..n {
            let parent = if i < 12 { 0 } else { (i - 12) / 3 + 1 };
            let (id, node) = if i % 2 == 1 {
                let id = format!("p{i:016}");
                let tipo = ["2", "2", "2", "1", "3"][i % 5];
                (
                    id.clone(),
                    json!({"id": id, "kind": "partner", "label": format!("SOCIO NUMERO {i} DA SILVA"), "level": 1, "tipo": tipo}),
                )
            } else {
                let id = format!("{i:08}");
                (id.clone(), json!({"id": id, "kind": "company", "label": format!("COMERCIO {i} LTDA"), "level": 2}))
            };
            let other = nodes[parent]["id"].as_str().unwrap().to_owned();
            let (from, to) = if id.starts_with('p') { (id, other) } else { (other, id) };
            edges.push(json!({"from": from, "to": to, "kind": "partner_of", "qualificacao": "49", "data_entrada": "2020-01-01"}));
            nodes.push(node);
        }
        let data = json!({"root": "00000000", "depth": 3, "max_nodes": 500, "truncated": false, "nodes": nodes, "edges": edges});
        Network::parse(&data).unwrap()
    }

    fn check(input: &Value, expected: &str) {
        assert_eq!(csv(&Network::parse(input).unwrap()), expected);
    }

    /// A row per link, the labels beside the ids, every cell guarded as the search's export does.
    #[test]
    fn links_as_csv() {
        check(
            &sample(false),
            "from,to,kind,qualificacao,data_entrada,from_label,to_label\r\n\
             paaaaaaaaaaaaaaaa,11222333,partner_of,22,2019-05-02,\"'=HOLDING <A&B> \"\"PARTICIPACOES\"\" S.A.\",EMPRESA EXEMPLO LTDA\r\n\
             paaaaaaaaaaaaaaaa,44555666,is_company,,,\"'=HOLDING <A&B> \"\"PARTICIPACOES\"\" S.A.\",HOLDING A&B PARTICIPACOES SOCIEDADE ANONIMA DE NOME LONGO\r\n\
             pbbbbbbbbbbbbbbbb,11222333,partner_of,37,2021-01-10,FOREIGN INVESTMENTS\u{1} LIMITED,EMPRESA EXEMPLO LTDA\r\n\
             pjnrquzm2ntgqdkaa,11222333,partner_of,49,2020-01-01,JOSE DA SILVA,EMPRESA EXEMPLO LTDA\r\n\
             pjnrquzm2ntgqdkaa,77888999,partner_of,49,'-2001,JOSE DA SILVA,\"SILVA, COMERCIO DE ALIMENTOS\"\r\n",
        );
        let empty = json!({"root": "1", "depth": 1, "max_nodes": 1, "truncated": false, "nodes": [], "edges": []});
        check(&empty, "from,to,kind,qualificacao,data_entrada,from_label,to_label\r\n");
    }

    #[test]
    fn text_as_xml_holds_it() {
        for (text, expected) in [
            ("A&B <C> \"D\" 'E'", "A&amp;B &lt;C&gt; &quot;D&quot; &apos;E&apos;"),
            ("a\u{1}b\u{1f}c\td\u{fffe}", "a\u{fffd}b\u{fffd}c\td\u{fffd}"),
            ("SÃO JOSÉ", "SÃO JOSÉ"),
        ] {
            assert_eq!(xml(text), expected, "{text:?}");
        }
    }

    /// A label fits its room: whole when it does, else cut at a character with `…`.
    #[test]
    fn labels_fit() {
        for (text, expected) in [
            ("JOSE DA SILVA", "JOSE DA SILVA"),
            ("  JOSE  ", "JOSE"),
            ("HOLDING A&B PARTICIPACOES SOCIEDADE ANONIMA", "HOLDING A&B PART…"),
            ("EMPRESA EXEMPLO LTDA", "EMPRESA EXEMPL…"),
        ] {
            let got = fit(text, 120.0, 11.0);
            assert_eq!(got, expected, "{text}");
            assert!(text_px(&got, 11.0) <= 120.0, "{got}");
        }
    }

    /// An element of a parsed document.
    #[derive(Debug, Default)]
    struct El {
        name: String,
        attrs: HashMap<String, String>,
        text: String,
        children: Vec<El>,
    }

    impl El {
        fn attr(&self, name: &str) -> &str {
            self.attrs.get(name).map_or("", String::as_str)
        }

        /// This element and all within it, in document order.
        fn all(&self) -> Vec<&El> {
            let mut out = vec![self];
            for child in &self.children {
                out.extend(child.all());
            }
            out
        }

        fn with_class(&self, class: &str) -> Vec<&El> {
            self.all().into_iter().filter(|e| e.attr("class").split(' ').any(|c| c == class)).collect()
        }

        fn child(&self, name: &str) -> &El {
            self.children.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no <{name}> in {self:?}"))
        }
    }

    /// A whole XML document parsed by quick-xml (it fails on what is not well-formed).
    fn parse_xml(text: &str) -> El {
        let mut reader = quick_xml::Reader::from_str(text);
        let mut stack = vec![El::default()];
        let open = |e: &quick_xml::events::BytesStart| El {
            name: String::from_utf8(e.name().as_ref().to_vec()).unwrap(),
            attrs: e
                .attributes()
                .map(|a| {
                    let a = a.unwrap();
                    (String::from_utf8(a.key.as_ref().to_vec()).unwrap(), a.unescape_value().unwrap().into_owned())
                })
                .collect(),
            ..El::default()
        };
        loop {
            match reader.read_event().unwrap() {
                Event::Start(e) => stack.push(open(&e)),
                Event::Empty(e) => stack.last_mut().unwrap().children.push(open(&e)),
                Event::End(_) => {
                    let done = stack.pop().unwrap();
                    stack.last_mut().unwrap().children.push(done);
                }
                Event::Text(t) => stack.last_mut().unwrap().text.push_str(&t.decode().unwrap()),
                Event::GeneralRef(r) => {
                    let c = match (r.resolve_char_ref().unwrap(), r.decode().unwrap().as_ref()) {
                        (Some(c), _) => c,
                        (None, "amp") => '&',
                        (None, "lt") => '<',
                        (None, "gt") => '>',
                        (None, "quot") => '"',
                        (None, "apos") => '\'',
                        (None, other) => panic!("unknown entity {other}"),
                    };
                    stack.last_mut().unwrap().text.push(c);
                }
                Event::Eof => break,
                _ => {}
            }
        }
        assert_eq!(stack.len(), 1, "every element closed");
        stack.pop().unwrap().children.pop().expect("a root element")
    }

    /// The sample's nodes in a picture: a shape and a colour per kind, the whole name in each
    /// title, a long one cut on the picture, the company asked about in bold.
    fn nodes_as_drawn(doc: &El, lang: Lang) {
        let shapes: Vec<(&str, &str, usize)> = doc
            .with_class("node")
            .iter()
            .map(|g| {
                let shape = &g.children[1];
                (g.attr("class"), shape.name.as_str(), shape.attr("points").split(' ').count())
            })
            .collect();
        assert_eq!(
            shapes,
            [
                ("node root", "rect", 1),
                ("node person", "circle", 1),
                ("node entity", "polygon", 4),
                ("node foreign", "polygon", 3),
                ("node company", "rect", 1),
                ("node company", "rect", 1)
            ]
        );
        let fills: std::collections::HashSet<&str> =
            doc.with_class("node").iter().map(|g| g.children[1].attr("fill")).collect();
        assert_eq!(fills.len(), 5, "a colour per kind");
        let nodes = doc.with_class("node");
        let entity = nodes[2];
        assert_eq!(
            entity.child("title").text,
            format!("=HOLDING <A&B> \"PARTICIPACOES\" S.A. ({}, 44555666000199)", lang.t("net_entity"))
        );
        assert_eq!(nodes[3].child("title").text.split(" (").next(), Some("FOREIGN INVESTMENTS\u{fffd} LIMITED"));
        let long = &nodes[4].child("text").text;
        assert!(long.starts_with("HOLDING A&B P") && long.ends_with('…'), "{long}");
        assert_eq!(nodes[0].child("text").attr("font-weight"), "bold", "the company asked about stands out");
    }

    /// The picture as a person and a screen reader get it, at both widths and in each language:
    /// an accessible image, a shape and colour per kind, every label whole in a title and cut to
    /// fit on the picture, a legend, the company asked about set apart, a cut network said so.
    #[test]
    fn the_picture_shows_the_network() {
        for (width, lang, truncated) in
            [(Width::Narrow, Lang::PtBr, false), (Width::Wide, Lang::En, true), (Width::Narrow, Lang::Es, true)]
        {
            let net = Network::parse(&sample(truncated)).unwrap();
            let text = svg(&net, width, lang);
            let doc = parse_xml(&text);
            let px = width.px().to_string();
            assert_eq!((doc.name.as_str(), doc.attr("role"), doc.attr("width")), ("svg", "img", px.as_str()));
            let [title, desc] = [doc.child("title"), doc.child("desc")];
            assert_eq!(doc.attr("aria-labelledby"), format!("{} {}", title.attr("id"), desc.attr("id")));
            assert_eq!(title.text, fill(lang.t("net_title"), &["EMPRESA EXEMPLO LTDA"]));
            assert!(desc.text.starts_with(&fill(lang.t("net_desc"), &["3", "3", "5", "2"])), "{}", desc.text);
            nodes_as_drawn(&doc, lang);
            let legend: Vec<&str> = doc.with_class("legend")[0]
                .all()
                .iter()
                .filter(|e| e.name == "text")
                .map(|e| e.text.as_str())
                .collect();
            let words = [
                "net_root",
                "net_company",
                "net_person",
                "net_entity",
                "net_foreign",
                "net_partner_of",
                "net_is_company",
            ];
            assert_eq!(legend, words.map(|w| lang.t(w)));
            let cut = doc.with_class("truncated");
            assert_eq!(cut.len(), usize::from(truncated));
            if truncated {
                assert_eq!(cut[0].text, fill(lang.t("net_truncated"), &["7"]));
            }
            assert_eq!(doc.with_class("partner_of").len(), 4);
            assert_eq!(doc.with_class("is_company").len(), 1);
            assert_eq!(
                doc.with_class("partner_of")[2].child("title").text,
                format!(
                    "JOSE DA SILVA → EMPRESA EXEMPLO LTDA: {}, Sócio-Administrador, {}",
                    lang.t("net_partner_of"),
                    show::date(lang, "2020-01-01")
                )
            );
            for e in doc.all() {
                assert!(!["script", "a", "image", "foreignObject", "style"].contains(&e.name.as_str()), "{}", e.name);
                assert!(e.attrs.keys().all(|k| !k.starts_with("on") && !k.contains("href")), "{:?}", e.attrs);
            }
        }
    }

    /// The same network gives the same bytes (the page and its tests rely on it).
    #[test]
    fn the_same_network_gives_the_same_picture() {
        let net = generated(80);
        assert_eq!(svg(&net, Width::Wide, Lang::En), svg(&net, Width::Wide, Lang::En));
        assert_eq!(svg(&net, Width::Narrow, Lang::En), svg(&net, Width::Narrow, Lang::En));
    }

    /// What networkx (in the Python that `CNPJ_TEST_PYTHON` names, as `scripts/setup-test-deps`
    /// fills it) reads of a GraphML document: the graph's values, and its nodes and links with theirs.
    fn networkx(graphml: &str) -> Value {
        use std::io::Write as _;
        let python = std::env::var("CNPJ_TEST_PYTHON").unwrap_or_else(|_| {
            panic!(
                "CNPJ_TEST_PYTHON is not set: the GraphML test needs a Python with networkx (scripts/setup-test-deps)"
            )
        });
        let script = "import json, sys, networkx as nx\n\
                      g = nx.read_graphml(sys.stdin.buffer)\n\
                      print(json.dumps({'directed': g.is_directed(), 'graph': g.graph,\n\
                        'nodes': [[n, d] for n, d in g.nodes(data=True)],\n\
                        'edges': [[u, v, d] for u, v, d in g.edges(data=True)]}))";
        let mut child = std::process::Command::new(&python)
            .args(["-c", script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("CNPJ_TEST_PYTHON={python} cannot be run: {e}"));
        child.stdin.take().unwrap().write_all(graphml.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "networkx: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// networkx reads the GraphML back whole: every node and link, each value typed and unescaped.
    #[test]
    fn graphml_as_networkx_reads_it() {
        let data = sample(true);
        let read = networkx(&graphml(&Network::parse(&data).unwrap()));
        assert_eq!(read["directed"], true);
        assert_eq!(
            read["graph"],
            json!({"node_default": {}, "edge_default": {}, "root": "11222333", "depth": 2, "max_nodes": 7,
                   "active_only": false, "truncated": true})
        );
        let nodes = read["nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), data["nodes"].as_array().unwrap().len());
        for (got, sent) in nodes.iter().zip(data["nodes"].as_array().unwrap()) {
            let mut expected = sent.as_object().unwrap().clone();
            let id = expected.remove("id").unwrap();
            expected.retain(|_, v| !v.is_null());
            if let Some(Value::String(label)) = expected.get_mut("label") {
                *label = label.replace('\u{1}', "\u{fffd}");
            }
            assert_eq!(got, &json!([id, expected]));
        }
        // networkx lists links by node; the answer, by (from, to, kind, …).
        let mut edges = read["edges"].as_array().unwrap().clone();
        edges.sort_by_key(|e| (e[0].to_string(), e[1].to_string(), e[2]["kind"].to_string()));
        assert_eq!(edges.len(), data["edges"].as_array().unwrap().len());
        for (got, sent) in edges.iter().zip(data["edges"].as_array().unwrap()) {
            let mut expected = sent.as_object().unwrap().clone();
            let (from, to) = (expected.remove("from").unwrap(), expected.remove("to").unwrap());
            expected.retain(|_, v| !v.is_null());
            assert_eq!(got, &json!([from, to, expected]));
        }
    }

    /// Every footprint (a shape over its label) within the picture's width, none over another.
    #[test]
    fn labels_do_not_overlap() {
        for n in [1, 6, 40, 500] {
            for width in [Width::Narrow, Width::Wide] {
                let (net, look) = (generated(n), width.look());
                let drawn: Vec<Drawn> = net.nodes.iter().map(|n| Drawn::of(n, &net.root, &look)).collect();
                let cells = snap(&place(&net), ((look.width - 2.0 * MARGIN) / look.cell) as usize);
                let (at, _) = lay_out(&cells, &drawn, &look, 0.0);
                let boxes: Vec<[f64; 4]> = at
                    .iter()
                    .zip(&drawn)
                    .map(|(p, d)| {
                        [p.0 - d.size.0 / 2.0, p.1 - d.size.1 / 2.0, p.0 + d.size.0 / 2.0, p.1 + d.size.1 / 2.0]
                    })
                    .collect();
                for (i, a) in boxes.iter().enumerate() {
                    assert!(a[0] >= MARGIN && a[2] <= look.width - MARGIN, "{n} {width:?} {a:?}");
                    let over = boxes[i + 1..].iter().find(|b| a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3]);
                    assert_eq!(over, None, "{n} nodes at {width:?}: {a:?}");
                }
            }
        }
    }
}
