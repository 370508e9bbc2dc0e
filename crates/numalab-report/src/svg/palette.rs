//! Colours of heatmap cells: the perceptually uniform viridis palette, and
//! the text colour that reads best on a cell.

/// Viridis (matplotlib), 11 stops from 0 (dark purple) to 1 (yellow).
const VIRIDIS: [[u8; 3]; 11] = [
    [0x44, 0x01, 0x54],
    [0x48, 0x24, 0x75],
    [0x41, 0x44, 0x87],
    [0x35, 0x5f, 0x8d],
    [0x2a, 0x78, 0x8e],
    [0x21, 0x91, 0x8c],
    [0x22, 0xa8, 0x84],
    [0x44, 0xbf, 0x70],
    [0x7a, 0xd1, 0x51],
    [0xbd, 0xdf, 0x26],
    [0xfd, 0xe7, 0x25],
];

/// Viridis at `t` in 0..=1, interpolated between stops.
pub(super) fn viridis(t: f64) -> [u8; 3] {
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.5
    };
    let x = t * (VIRIDIS.len() - 1) as f64;
    let i = (x.floor() as usize).min(VIRIDIS.len() - 2);
    let f = x - i as f64;
    let mut c = [0u8; 3];
    for k in 0..3 {
        let a = VIRIDIS[i][k] as f64;
        let b = VIRIDIS[i + 1][k] as f64;
        c[k] = (a + (b - a) * f).round() as u8;
    }
    c
}

/// `#rrggbb`.
pub(super) fn hex(c: [u8; 3]) -> String {
    format!("#{:02x}{:02x}{:02x}", c[0], c[1], c[2])
}

/// WCAG relative luminance of an sRGB colour.
fn luminance(c: [u8; 3]) -> f64 {
    let lin = |v: u8| {
        let s = v as f64 / 255.0;
        if s <= 0.04045 {
            s / 12.92
        } else {
            ((s + 0.055) / 1.055).powf(2.4)
        }
    };
    0.2126 * lin(c[0]) + 0.7152 * lin(c[1]) + 0.0722 * lin(c[2])
}

/// Text colour with the better contrast on `bg`: near-black or white.
pub(super) fn text_on(bg: [u8; 3]) -> &'static str {
    let l = luminance(bg);
    let dark = (l + 0.05) / (luminance([0x11, 0x11, 0x11]) + 0.05);
    let light = 1.05 / (l + 0.05);
    if dark >= light {
        "#111111"
    } else {
        "#ffffff"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn viridis_ends_and_contrast() {
        assert_eq!(hex(viridis(0.0)), "#440154");
        assert_eq!(hex(viridis(1.0)), "#fde725");
        assert_eq!(viridis(f64::NAN), viridis(0.5));
        assert_eq!(text_on(viridis(1.0)), "#111111");
        assert_eq!(text_on(viridis(0.0)), "#ffffff");
    }
}
