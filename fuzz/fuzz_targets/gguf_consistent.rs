// What every header the GGUF parser accepts must satisfy (shared by the gguf fuzz targets,
// included after `use gguf_reader::*`): versions 2 or 3, a power-of-two alignment, every getter
// callable on every key, tensor data inside the file, aligned, disjoint.

fn consistent(h: &GgufHeader, data: &[u8]) {
    assert!(h.version == 2 || h.version == 3);
    assert!(h.alignment.is_power_of_two());
    assert_eq!(h.data_offset % h.alignment, 0);
    for (k, _) in &h.meta {
        let _ = h.get_u32(k);
        let _ = h.get_f32(k);
        let _ = h.get_str(k);
        let _ = h.get_bool_or(k, false);
        let _ = h.get_str_array(k);
        let _ = h.get_i32_array(k);
    }
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for t in &h.tensors {
        assert!(!t.dims.is_empty() && t.dims.len() <= 4 && t.dims.iter().all(|&d| d > 0));
        assert_eq!(t.row_len() % t.ty.block_elems(), 0);
        assert_eq!(t.row_bytes() * t.n_rows(), t.n_bytes);
        assert_eq!(t.offset % h.alignment, 0);
        let start = h.data_offset + t.offset;
        assert!(start + t.n_bytes <= data.len());
        assert!(h.tensor(&t.name).is_ok());
        ranges.push((start, start + t.n_bytes));
    }
    ranges.sort();
    for w in ranges.windows(2) {
        assert!(w[0].1 <= w[1].0);
    }
}
