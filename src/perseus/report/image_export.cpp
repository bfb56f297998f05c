#include "perseus/report/image_export.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <memory>

#include <cairo-pdf.h>
#include <cairo.h>
#include <librsvg/rsvg.h>
#include <fmt/format.h>

#include "perseus/model/shared_library.hpp"

namespace perseus::report {
namespace {

// librsvg, and through it cairo and GLib, loaded by the first figure exported as PNG or PDF
// (model/shared_library.hpp says why): the functions this file calls, with their headers' types.
struct Rsvg {
  SharedLibrary library{"librsvg-2.so.2", "librsvg2-2"};
  PERSEUS_LIBRARY_FUNCTION(rsvg_handle_new_from_data);
  PERSEUS_LIBRARY_FUNCTION(rsvg_handle_get_intrinsic_size_in_pixels);
  PERSEUS_LIBRARY_FUNCTION(rsvg_handle_render_document);
  PERSEUS_LIBRARY_FUNCTION(g_object_unref);
  PERSEUS_LIBRARY_FUNCTION(g_error_free);
  PERSEUS_LIBRARY_FUNCTION(cairo_create);
  PERSEUS_LIBRARY_FUNCTION(cairo_scale);
  PERSEUS_LIBRARY_FUNCTION(cairo_destroy);
  PERSEUS_LIBRARY_FUNCTION(cairo_image_surface_create);
  PERSEUS_LIBRARY_FUNCTION(cairo_pdf_surface_create_for_stream);
  PERSEUS_LIBRARY_FUNCTION(cairo_surface_write_to_png_stream);
  PERSEUS_LIBRARY_FUNCTION(cairo_surface_finish);
  PERSEUS_LIBRARY_FUNCTION(cairo_surface_status);
  PERSEUS_LIBRARY_FUNCTION(cairo_surface_destroy);
};

// Loaded once (thread-safe); a failed load throws here and is tried again by the next export.
const Rsvg& rsvg() {
  static const Rsvg loaded;
  return loaded;
}

// cairo writes through a callback: collect the bytes.
cairo_status_t append(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

struct HandleDeleter {
  void operator()(RsvgHandle* handle) const { rsvg().g_object_unref(handle); }
};
struct SurfaceDeleter {
  void operator()(cairo_surface_t* surface) const { rsvg().cairo_surface_destroy(surface); }
};
struct ContextDeleter {
  void operator()(cairo_t* cr) const { rsvg().cairo_destroy(cr); }
};

void render(RsvgHandle* handle, cairo_surface_t* surface, double width, double height, double scale) {
  std::unique_ptr<cairo_t, ContextDeleter> cr(rsvg().cairo_create(surface));
  rsvg().cairo_scale(cr.get(), scale, scale);
  const RsvgRectangle viewport{0.0, 0.0, width, height};
  GError* error = nullptr;
  if (!rsvg().rsvg_handle_render_document(handle, cr.get(), &viewport, &error)) {
    const std::string why = error ? error->message : "unknown error";
    if (error) rsvg().g_error_free(error);
    throw InputError("cannot render the figure: " + why);
  }
}

}  // namespace

ImageFormat parse_image_format(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "svg") return ImageFormat::kSvg;
  if (lower == "png") return ImageFormat::kPng;
  if (lower == "pdf") return ImageFormat::kPdf;
  throw InputError(fmt::format("unknown figure format '{}': expected svg, png or pdf", name));
}

std::string_view extension(ImageFormat format) {
  switch (format) {
    case ImageFormat::kPng: return "png";
    case ImageFormat::kPdf: return "pdf";
    case ImageFormat::kSvg: break;
  }
  return "svg";
}

std::string render_image(const std::string& svg, ImageFormat format, double scale) {
  if (format == ImageFormat::kSvg) return svg;
  GError* error = nullptr;
  std::unique_ptr<RsvgHandle, HandleDeleter> handle(
      rsvg().rsvg_handle_new_from_data(reinterpret_cast<const guint8*>(svg.data()), svg.size(), &error));
  if (!handle) {
    const std::string why = error ? error->message : "unknown error";
    if (error) rsvg().g_error_free(error);
    throw InputError("cannot read the figure's SVG: " + why);
  }
  double width = 0.0, height = 0.0;
  if (!rsvg().rsvg_handle_get_intrinsic_size_in_pixels(handle.get(), &width, &height) || width <= 0.0 || height <= 0.0) {
    throw InputError("the figure's SVG has no width and height in pixels");
  }
  std::string bytes;
  if (format == ImageFormat::kPng) {
    std::unique_ptr<cairo_surface_t, SurfaceDeleter> surface(rsvg().cairo_image_surface_create(
        CAIRO_FORMAT_ARGB32, static_cast<int>(std::ceil(width * scale)), static_cast<int>(std::ceil(height * scale))));
    render(handle.get(), surface.get(), width, height, scale);
    if (rsvg().cairo_surface_write_to_png_stream(surface.get(), append, &bytes) != CAIRO_STATUS_SUCCESS) {
      throw InputError("cannot encode the figure as PNG");
    }
    return bytes;
  }
  // PDF measures in points: 96 px to the inch, 72 pt.
  std::unique_ptr<cairo_surface_t, SurfaceDeleter> surface(
      rsvg().cairo_pdf_surface_create_for_stream(append, &bytes, width * 0.75, height * 0.75));
  render(handle.get(), surface.get(), width, height, 0.75);
  rsvg().cairo_surface_finish(surface.get());
  if (rsvg().cairo_surface_status(surface.get()) != CAIRO_STATUS_SUCCESS) throw InputError("cannot write the figure as PDF");
  return bytes;
}

}  // namespace perseus::report
