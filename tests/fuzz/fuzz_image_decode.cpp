// The image decoders (PNG, JPEG, WebP) on arbitrary bytes: decode_image must return an image of
// the size it says, within the limits, or throw pagoda::Error; never crash, hang or leak. Small
// limits keep each input cheap; whatever decodes is then resized and preprocessed for LLaVA's
// and Qwen2-VL's encoders, whose arithmetic must hold for any size the decoder lets through.

#include <cstdlib>
#include <span>

#include "engine/image/image_decode.h"
#include "engine/image/image_resize.h"
#include "engine/vision/image_preprocess.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const pagoda::ImageLimits limits{1024, 1024 * 1024};
  pagoda::fuzz::expect_clean([&] {
    const pagoda::RgbImage image =
        pagoda::decode_image(std::as_bytes(std::span(reinterpret_cast<const char*>(data), size)), limits);
    const bool sized = image.width >= 1 && image.height >= 1 && image.width <= limits.max_side &&
                       image.height <= limits.max_side &&
                       image.rgb.size() == size_t(image.width) * size_t(image.height) * 3;
    if (!sized) std::abort();
    (void)pagoda::resize(image, 7, 5, pagoda::ResampleFilter::Lanczos);
    pagoda::VisionConfig llava;
    llava.image_size = 28;
    llava.patch_size = 14;
    (void)pagoda::preprocess_image(image, llava);
    pagoda::VisionConfig qwen;
    qwen.projector = pagoda::ProjectorType::Qwen2VL;
    qwen.patch_size = 14;
    qwen.spatial_merge = 2;
    qwen.max_pixels = 56 * 56;
    qwen.min_pixels = 28 * 28;
    (void)pagoda::preprocess_image(image, qwen);
  });
  return 0;
}
